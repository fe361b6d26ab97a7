"""QR codes drawn on the server as SVG (the `segno` package): the console shows the pending 2FA secret's
`otpauth://` URI as an image an authenticator app scans, without any script of its own drawing it."""

from __future__ import annotations

import io

import segno

QR_ERROR_LEVEL = "m"  # 15 % of the code may be damaged; what authenticator apps read without trouble
QR_SCALE = 6  # pixels per module at the SVG's natural size
QR_BORDER = 4  # the quiet zone the QR standard asks for, in modules


def qr_svg(text: str) -> bytes:
    """`text` as a QR code: a complete SVG document, dark modules on white (also in a dark page), with a
    title for assistive technology."""
    out = io.BytesIO()
    segno.make(text, error=QR_ERROR_LEVEL, micro=False).save(
        out, kind="svg", scale=QR_SCALE, border=QR_BORDER, dark="#000", light="#fff",
        title="QR code of the authenticator set-up", xmldecl=True, svgns=True)
    return out.getvalue()
