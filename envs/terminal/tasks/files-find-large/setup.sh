#!/bin/bash
set -e
mkdir -p data/logs data/images/2024 data/tmp "data/old stuff"
mk() { head -c "$2" /dev/zero | tr '\0' 'x' > "data/$1"; }
mk logs/big.log 20000
mk logs/small.log 300
mk logs/exact.log 10240
mk logs/just-over.log 10241
mk images/2024/photo.raw 50000
mk images/thumb.png 2000
mk "old stuff/archive copy.txt" 12000
mk tmp/cache.bin 10239
mk README 100
mk Zeta.dat 30000
