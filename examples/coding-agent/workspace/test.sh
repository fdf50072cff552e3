#!/bin/sh
# The checks of greet.sh: each prints "ok" or "FAIL" with what greet.sh said, and the first failure stops them.
check() {
  got=$(sh greet.sh "$1")
  if [ "$got" = "$2" ]; then
    echo "ok: greet.sh '$1' says $got"
  else
    echo "FAIL: greet.sh '$1' says $got, not $2"
    exit 1
  fi
}
check Ada 'Hello, Ada!'
check '' 'Hello, world!'
