#!/usr/bin/env bash
# Issue 57's CPU checks at HEAD: the 14B fp8 folder with the full UMT5-XXL, disk then host storage; the A14B folder
# refused with host storage and run with disk.
set -u
cd /work/main
OUT=${OUT:-/tmp/c57}; mkdir -p $OUT
V=.venv/bin/vidax
W=/tmp/w14; A=/tmp/a14
[ -d $W ] || $V bench --write-random-checkpoint wan2.1-t2v-14b $W --weight-dtype float8_e4m3fn --full-text-encoder --fill zeros > $OUT/write14.txt 2>&1
KEYS="model.dtype=bfloat16 sampling.height=64 sampling.width=64 sampling.num_frames=5 sampling.num_steps=1 offload.enabled=true offload.chunk_size=2"
export VIDAX_OFFLOAD_CACHE=/tmp/c57cache
for st in disk host; do
  s=$(date +%s)
  /usr/bin/time -v $V run configs/wan21_14b_480p.yaml model.checkpoint=$W $KEYS offload.storage=$st output.path=$OUT/$st.mp4 output.metrics=$OUT/$st.metrics.json > $OUT/$st.summary.txt 2>&1
  echo "rc $? wall $(( $(date +%s) - s ))" >> $OUT/$st.summary.txt
  rm -rf /tmp/c57cache
done
[ -d $A ] || $V bench --write-random-checkpoint wan2.2-t2v-a14b $A --weight-dtype float8_e4m3fn --full-text-encoder --fill zeros > $OUT/writea14.txt 2>&1
s=$(date +%s)
$V run configs/wan22_t2v_a14b_480p.yaml model.checkpoint=$A $KEYS offload.storage=host output.path=$OUT/a14host.mp4 > $OUT/a14host.summary.txt 2>&1
echo "rc $? wall $(( $(date +%s) - s ))" >> $OUT/a14host.summary.txt
s=$(date +%s)
/usr/bin/time -v $V run configs/wan22_t2v_a14b_480p.yaml model.checkpoint=$A $KEYS offload.storage=disk output.path=$OUT/a14disk.mp4 output.metrics=$OUT/a14disk.metrics.json > $OUT/a14disk.summary.txt 2>&1
echo "rc $? wall $(( $(date +%s) - s ))" >> $OUT/a14disk.summary.txt
rm -rf /tmp/c57cache
echo finished > $OUT/done
