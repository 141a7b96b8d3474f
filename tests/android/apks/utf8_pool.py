#!/usr/bin/env python3
"""Rewrites the string pool of an APK's binary AndroidManifest.xml as UTF-8.

aapt (v1) always writes a compiled XML's string pool in UTF-16; aapt2 and
other tools write UTF-8 (flag 0x100). This makes the UTF-8 kind from an
aapt build, so the parser is tested on both: same strings, same order,
only the encoding differs. Usage: utf8_pool.py IN.apk OUT.apk (unsigned).
"""
import struct
import sys
import zipfile

UTF8 = 0x100


def decode_utf16_pool(chunk, count, strings_start):
    offsets = struct.unpack_from(f"<{count}I", chunk, 28)
    out = []
    for off in offsets:
        pos = strings_start + off
        (n,) = struct.unpack_from("<H", chunk, pos)
        pos += 2
        if n & 0x8000:
            (low,) = struct.unpack_from("<H", chunk, pos)
            n = ((n & 0x7FFF) << 16) | low
            pos += 2
        out.append(chunk[pos:pos + 2 * n].decode("utf-16-le"))
    return out


def length_utf8(n):
    return bytes([n]) if n < 0x80 else bytes([(n >> 8) | 0x80, n & 0xFF])


def encode_utf8_pool(strings, style_count, flags):
    data = b""
    offsets = []
    for s in strings:
        offsets.append(len(data))
        raw = s.encode("utf-8")
        data += length_utf8(len(s.encode("utf-16-le")) // 2) + length_utf8(len(raw)) + raw + b"\0"
    data += b"\0" * (-len(data) % 4)
    header_size = 28
    strings_start = header_size + 4 * len(strings)
    size = strings_start + len(data)
    header = struct.pack("<HHIIIIII", 1, header_size, size, len(strings), style_count, flags | UTF8, strings_start, 0)
    return header + struct.pack(f"<{len(strings)}I", *offsets) + data


def rewrite(axml):
    xml_type, xml_header, _ = struct.unpack_from("<HHI", axml, 0)
    assert xml_type == 3, "not binary XML"
    pool_at = xml_header
    kind, _, size, count, styles, flags, strings_start, _ = struct.unpack_from("<HHIIIIII", axml, pool_at)
    assert kind == 1 and styles == 0 and not flags & UTF8, "expected an aapt UTF-16 pool without styles"
    chunk = axml[pool_at:pool_at + size]
    pool = encode_utf8_pool(decode_utf16_pool(chunk, count, strings_start), styles, flags)
    rest = axml[pool_at + size:]
    body = pool + rest
    return struct.pack("<HHI", 3, xml_header, xml_header + len(body)) + body


def main(src, dst):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "AndroidManifest.xml":
                data = rewrite(data)
            zout.writestr(item, data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
