"""A page of a kept PDF rendered as a PNG, with a passage of its text marked, for the evidence inspector.

The passage is given as characters of the document's extracted text (`memorag.documents.pdf`
cleaned that text: hyphens joined, running heads dropped), so it is found again in the
page's own text layer by its letters and digits alone, and marked with a translucent box
over each line of its characters (PDFium's character boxes). Rendering is bounded: the
image is at most `MAX_PAGE_PIXELS` wide and tall, whatever the page's size.

PDFium is not safe to call from two threads at once; the server runs this on its one
model-work thread, like the reading of uploaded files.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from memorag.errors import InputError

MAX_PAGE_PIXELS = 2000  # the longer side of a rendered page, at most
DEFAULT_WIDTH = 900
MARK_FILL = np.array([255, 214, 0], dtype=np.float32)  # the highlight's colour (amber)
MARK_ALPHA = 0.38
MARK_EDGE = np.array([214, 120, 0], dtype=np.uint8)


@dataclass(frozen=True)
class Box:
    """A rectangle in PDF points, origin at the page's bottom left."""

    left: float
    bottom: float
    right: float
    top: float


@dataclass(frozen=True)
class RenderedPage:
    png: bytes
    page: int
    pages: int
    marked: int  # boxes drawn over the passage (0: not found on this page)


def _alnum_key(text: str) -> tuple[str, list[int]]:
    """`text`'s letters and digits, lower-case, and each one's index in `text`."""
    kept = [(index, char.lower()) for index, char in enumerate(text) if char.isalnum()]
    return "".join(char for _, char in kept), [index for index, _ in kept]


def passage_boxes(textpage, passage: str) -> list[Box]:
    """One box per line of `passage` on the page of `textpage` (a `pypdfium2.PdfTextPage`); [] if absent."""
    import pypdfium2.raw as pdfium

    wanted, _ = _alnum_key(passage)
    if not wanted:
        return []
    count = textpage.count_chars()
    page_text = "".join(chr(pdfium.FPDFText_GetUnicode(textpage.raw, index) or 32) for index in range(count))
    key, positions = _alnum_key(page_text)
    found = key.find(wanted)
    if found < 0:
        return []
    lines: list[list[float]] = []
    for index in positions[found: found + len(wanted)]:
        left, bottom, right, top = textpage.get_charbox(index, loose=True)
        line = lines[-1] if lines else None
        if line is not None and abs(line[1] - bottom) < 0.5 * max(top - bottom, 1.0) and left >= line[0] - 1:
            line[0], line[2], line[3] = min(line[0], left), max(line[2], right), max(line[3], top)
            line[1] = min(line[1], bottom)
        else:
            lines.append([left, bottom, right, top])
    return [Box(*line) for line in lines]


def render_page(data: bytes, page: int, passage: str = "", width: int = DEFAULT_WIDTH) -> RenderedPage:
    """Page `page` (1-based) of the PDF `data` as a PNG `width` pixels wide (bounded by
    `MAX_PAGE_PIXELS`), `passage` marked where its text is found on the page."""
    import pypdfium2

    if not 100 <= width <= MAX_PAGE_PIXELS:
        raise InputError(f"width={width}: give a page width from 100 to {MAX_PAGE_PIXELS} pixels")
    pdf = pypdfium2.PdfDocument(data)
    try:
        if not 1 <= page <= len(pdf):
            raise InputError(f"page {page} is not in the document; it has {len(pdf)} page(s)")
        pdf_page = pdf[page - 1]
        page_width, page_height = pdf_page.get_size()
        scale = min(width / page_width, MAX_PAGE_PIXELS / page_height)
        boxes = passage_boxes(pdf_page.get_textpage(), passage) if passage.strip() else []
        pixels = pdf_page.render(scale=scale, rev_byteorder=True).to_numpy()[..., :3].copy()  # [H, W, 3] RGB
        for box in boxes:
            mark(pixels, box, scale, page_height)
        return RenderedPage(encode_png(pixels), page, len(pdf), len(boxes))
    finally:
        pdf.close()


def mark(pixels: np.ndarray, box: Box, scale: float, page_height: float, pad: float = 1.5) -> None:
    """Blend the highlight over `box` (PDF points) in `pixels` ([H, W, 3]) and outline it."""
    height, width = pixels.shape[:2]
    x0 = max(0, int((box.left - pad) * scale))
    x1 = min(width, int((box.right + pad) * scale) + 1)
    y0 = max(0, int((page_height - box.top - pad) * scale))
    y1 = min(height, int((page_height - box.bottom + pad) * scale) + 1)
    if x1 <= x0 or y1 <= y0:
        return
    region = pixels[y0:y1, x0:x1].astype(np.float32)
    pixels[y0:y1, x0:x1] = (region * (1 - MARK_ALPHA) + MARK_FILL * MARK_ALPHA).astype(np.uint8)
    pixels[y0, x0:x1] = pixels[y1 - 1, x0:x1] = MARK_EDGE
    pixels[y0:y1, x0] = pixels[y0:y1, x1 - 1] = MARK_EDGE


def encode_png(pixels: np.ndarray) -> bytes:
    """`pixels` ([H, W, 3] uint8 RGB) as a PNG file (8-bit truecolour, no filter)."""
    height, width = pixels.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8), pixels.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + chunk(b"IEND", b""))
