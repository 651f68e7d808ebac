cd /work/main
export VIDAX_OFFLOAD_CACHE=/tmp/c57cache
rm -rf /tmp/c57cache
s=$(date +%s)
/usr/bin/time -v .venv/bin/vidax run configs/wan22_t2v_a14b_480p.yaml model.checkpoint=/tmp/a14 model.dtype=bfloat16 sampling.height=64 sampling.width=64 sampling.num_frames=5 sampling.num_steps=2 offload.enabled=true offload.chunk_size=2 offload.storage=disk output.path=/tmp/c57/a14disk.mp4 output.overwrite=true output.metrics=/tmp/c57/a14disk.metrics.json > /tmp/c57/a14disk.summary.txt 2>&1
echo "rc $? wall $(( $(date +%s) - s ))" >> /tmp/c57/a14disk.summary.txt
rm -rf /tmp/c57cache
