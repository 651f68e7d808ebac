"""What a run tells its user: the dry run (``dry_run``, ``encoder_check``, ``phase_time``), the progress display
(``progress``), the metrics record and closing summary (``metrics``), FLOPs and MFU against the device's peak
(``throughput``), compile time per phase (``compile_watch``) and the memory a process measured (``memory``)."""
