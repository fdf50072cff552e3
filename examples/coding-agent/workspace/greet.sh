#!/bin/sh
# Greets the person named by the first argument.
echo "Hello, $1"
