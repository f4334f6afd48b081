#!/bin/bash
cd "$(dirname "$0")/.."
mkdir -p /tmp/x && tar -xJf build-exp/dec.tar.xz -C /tmp/x
export LD_LIBRARY_PATH=/tmp/x/dec
for round in 1 2 3; do
for v in main r2 r2tw8k tw8k; do
  /tmp/x/dec/frank_$v bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100 > $OUT/dec_${v}_$round.txt 2>&1
  echo "$v r$round: $(grep -iE 'step' $OUT/dec_${v}_$round.txt | grep -iE 'median|of measured|GB/s' | head -2 | tr '\n' ' ')"
done
done
for v in main r2tw8k; do
/tmp/x/dec/frank_$v bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 50 --tokens-per-step 2 --same-experts > $OUT/dec2_${v}.txt 2>&1
echo "$v T2: $(grep -iE 'step' $OUT/dec2_${v}.txt | grep -iE 'median|of measured|GB/s' | head -2 | tr '\n' ' ')"
done
tail -30 $OUT/dec_main_1.txt
