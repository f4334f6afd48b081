#!/bin/bash
# Session 16, device run 8: what folding the index weights' 1/sqrt(H) scale (and the index queries'
# RoPE) into the scores kernel could save: diagnostic switches skip those kernels on the branch
# (FRANK_DIAG_CSA=3: the scale, which only multiplies every score by 1/8 for H = 64, so the
# selection is the same; 4: the RoPE too, timing only). D = the landed code plus the switches.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
D=build-exp/D
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 60 $D/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2; do
  arm landed X=0
  arm no_scale FRANK_DIAG_CSA=3
  arm no_scale_rope FRANK_DIAG_CSA=4
done
