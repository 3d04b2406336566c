# one dask_scaling run with a watchdog: $1 chunk MiB, $2 seconds, $3 pipelines, $4 workers
tag=c$1-w$4
export PYTHONFAULTHANDLER=1
( cd $W && exec $N benchmarks/dask_scaling.py --gib ${GIB:-32} --chunk-mib $1 --workers $4 --repeat 3 --warm 1 --pipelines $3 --out $OUT/$tag ) > $OUT/$tag.log 2>&1 &
pid=$!
for i in $(seq 1 $2); do
  sleep 1
  kill -0 $pid 2>/dev/null || break
  if [ $((i % 20)) = 0 ]; then echo "t=$i" >> $OUT/$tag.smi; nvidia-smi --query-gpu=memory.used,utilization.gpu,clocks.sm --format=csv,noheader >> $OUT/$tag.smi; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >> $OUT/$tag.smi; fi
done
if kill -0 $pid 2>/dev/null; then
  echo "HUNG after $2 s" >> $OUT/$tag.log
  ps -eo pid,ppid,stat,rss,etime,wchan:30,args | grep -i python >> $OUT/$tag.ps
  for p in $(pgrep -f "python"); do [ $p != $$ ] && cat /proc/$p/status | grep -E "^(Name|State|Threads|VmRSS)" >> $OUT/$tag.ps; done
  pkill -ABRT -f "multiprocessing" ; sleep 3
  kill -ABRT $pid; sleep 3
  pkill -9 -f "multiprocessing"; kill -9 $pid; sleep 1
fi
wait $pid 2>/dev/null
echo "rc=$? done" >> $OUT/$tag.log
