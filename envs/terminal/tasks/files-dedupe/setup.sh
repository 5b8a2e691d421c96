#!/bin/bash
set -e
mkdir -p photos/sub photos/trip
w() { printf '%s\n' "$2" > "photos/$1"; }
w a.jpg AAA
w a_copy.jpg AAA
w sub/a2.jpg AAA
w b.jpg BBB
w b_copy.jpg BBB
w trip/b.jpg BBB
w c.jpg CCC
w trip/d.jpg DDD
w trip/e.jpg EEE
w sub/e.jpg EEE
