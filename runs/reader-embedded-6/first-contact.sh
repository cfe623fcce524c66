#!/bin/bash
# first contact with the sixth run as the default generator: `make demo`, then `memorag ask` with no --generator
cd /work/main
ask() { # file question mode
  echo "=== [$3|default generator] $(basename $1): $2"
  .venv/bin/memorag ask "$1" "$2" --mode "$3" -q 2>&1 | grep -v -i "warn\|^ *warnings\.\|Loading weights\|it/s\]"
}
echo "=== make demo"
make -s demo 2>&1 | grep -v -i "warn\|^ *warnings\.\|Loading weights\|it/s\]" | tail -25
K=examples/kjv_ruth_esther_jonah.txt
ask $K "Which city was Jonah sent to?" rag
ask $K "Who raised Esther?" rag
ask $K "Who raised Esther?" memorag
ask $K "Whom did Ruth marry?" rag
ask /tmp/fc/karsa.pdf "Who built the lighthouse on Karsa island?" rag
ask /tmp/fc/karsa.pdf "Who was the first keeper of the lighthouse?" rag
ask /tmp/fc/karsa.pdf "Who was the first mayor of Karsa?" rag
ask /usr/share/doc/libtasn1-doc/libtasn1.pdf "What is ASN1_MAX_NAME_SIZE?" rag
ask /usr/share/doc/libtasn1-doc/libtasn1.pdf "Which option of the asn1Decoding program runs a benchmark?" rag
ask /usr/share/doc/libtasn1-doc/libtasn1.pdf "Which option of the asn1Decoding program runs a benchmark?" memorag
