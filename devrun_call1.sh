#!/bin/bash
# call 1 (twelfth session): registry whole with wgmma on (16-bit and fp8), then numba_tc held-out set 3
set -x
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
export PYTHONDONTWRITEBYTECODE=1
L=/tmp/logs; mkdir -p $L
python3 -m pytest --co -q -p no:cacheprovider -m gpu tests/test_registry_kernels.py 2>/dev/null | grep '::' > $L/ids.txt
wc -l $L/ids.txt
split -n r/5 $L/ids.txt $L/part_
for f in $L/part_*; do
  (TILESIM_CUDA_WGMMA=1 timeout 170 python3 -m pytest -q -p no:cacheprovider -rf --tb=short $(cat $f) > $f.log 2>&1; echo "rc=$?" >> $f.log) &
done
wait
for f in $L/part_*.log; do echo "== $f"; grep -E "passed|failed|FAILED|rc=|Error" $f | tail -20; done
cat $L/part_*.log > $OUT/registry_wgmma.log
python3 benchmarks/numba_tc_holdout.py --set 3 --out $OUT/numba_tc_holdout3.json > $OUT/numba_tc_holdout3.log 2>&1
tail -30 $OUT/numba_tc_holdout3.log
