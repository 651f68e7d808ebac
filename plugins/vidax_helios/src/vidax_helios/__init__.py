"""vidax-helios: Helios (PKU-YuanGroup) in vidax, long video chunk by chunk with a multi-scale history."""
