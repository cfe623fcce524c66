#!/bin/bash
# resumable: the gists are checkpointed under $MEMORAG_CACHE_DIR/gists; rerun to continue
cd /work/wt/lite
export PYTHONPATH=/work/wt/lite MEMORAG_CACHE_DIR=/tmp/lite/run/cache
lscpu | grep -E "Model name|^CPU\(s\)" > /tmp/lite/run/machine.txt
date -u +%FT%TZ > /tmp/lite/run/started.txt
nice -n 10 prlimit --as=$((10*1024**3)) /usr/bin/time -v .venv/bin/python -m memorag ask /tmp/lite/run/kjv-genesis-deuteronomy.txt \
  "Who was the priest of Midian whose daughter Moses married?" --mode memorag-lite \
  > /tmp/lite/run/answer.txt 2> /tmp/lite/run/stderr.txt
echo $? > /tmp/lite/run/exit.txt
date -u +%FT%TZ > /tmp/lite/run/ended.txt
