#!/bin/bash
# First contact with the reader the package holds as the default generator: `make demo`, then `memorag ask`
# with no --generator, over the demo's book, a three-page PDF (karsa.pdf, built below with
# tests/documents/builders.pdf_bytes) and Debian's libtasn1 manual (apt-get install libtasn1-doc).
# The records of 2026-12-01 to 2026-12-06 name karsa.pdf's first and third pages only in part; the
# texts below give them in full (written 2026-12-06), and page 2 is as recorded.
cd "$(dirname "$0")/../.."
KARSA=$(mktemp -d)/karsa.pdf
PYTHONPATH=. .venv/bin/python - "$KARSA" <<'PY'
import sys
from tests.documents.builders import pdf_bytes
pages = ["The Karsa museum opens at ten in the morning and closes at five. It shows the nets, boats and "
         "photographs of the island's fishing families.",
         "The lighthouse on Karsa island was built in 1871 by the engineer Ilse Morven. Its first keeper was "
         "Tomas Brandt, who kept it for thirty years.",
         "The ferry to Karsa leaves the mainland harbour twice a day, at eight in the morning and at four in "
         "the afternoon, and takes forty minutes."]
open(sys.argv[1], "wb").write(pdf_bytes(pages))
PY
LIBTASN1=/usr/share/doc/libtasn1-doc/libtasn1.pdf
[ -f "$LIBTASN1" ] || echo "=== $LIBTASN1 is missing: its questions fail below (apt-get install libtasn1-doc)"
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
ask "$KARSA" "Who built the lighthouse on Karsa island?" rag
ask "$KARSA" "Who was the first keeper of the lighthouse?" rag
ask "$KARSA" "Who was the first mayor of Karsa?" rag
ask $LIBTASN1 "What is ASN1_MAX_NAME_SIZE?" rag
ask $LIBTASN1 "Which option of the asn1Decoding program runs a benchmark?" rag
ask $LIBTASN1 "Which option of the asn1Decoding program runs a benchmark?" memorag
