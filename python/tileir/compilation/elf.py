"""Reading a cubin (64-bit little-endian ELF): its functions and their parameter
tables."""

from __future__ import annotations

import struct

from ..errors import TileInternalError


# ---------------------------------------------------------------------------
# Reading a cubin (64-bit little-endian ELF)
# ---------------------------------------------------------------------------
def _elf_sections(image: bytes) -> list[tuple[str, int, int, int, int, int]]:
    """(name, type, offset, size, link, entry size) of each section."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise TileInternalError("not a 64-bit little-endian ELF image")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize)
               for i in range(shnum)]
    names = headers[shstrndx][4]
    return [(_c_string(image, names + h[0]), h[1], h[4], h[5], h[6], h[9]) for h in headers]


def _c_string(image: bytes, at: int) -> str:
    return image[at:image.index(b"\0", at)].decode()


def _elf_functions(image: bytes) -> set[str]:
    """The global function symbols of a cubin: its kernels."""
    sections = _elf_sections(image)
    found = set()
    for _, kind, offset, size, link, entsize in sections:
        if kind != 2:                                       # SHT_SYMTAB
            continue
        strtab = sections[link][2]
        for at in range(offset, offset + size, entsize):
            name, info = struct.unpack_from("<IB", image, at)
            if info & 0xF == 2 and info >> 4 == 1:          # STT_FUNC, STB_GLOBAL
                found.add(_c_string(image, strtab + name))
    return found


_EIFMT_SVAL, _EIATTR_KPARAM_INFO = 4, 0x17


def _kernel_params(image: bytes, kernel: str) -> list[tuple[int, int]]:
    """(offset, size) of each parameter of `kernel`, by ordinal, as ptxas laid them out
    (the EIATTR_KPARAM_INFO records of `.nv.info.<kernel>`, which cuobjdump -elf
    prints).  The offsets are what a packed parameter buffer must follow: ptxas aligns
    a CUtensorMap to 64 bytes of the constant bank, whose parameters start at 0x210 on
    sm_90, so no rule on offsets alone gives them."""
    data = next((image[offset:offset + size] for name, _, offset, size, _, _
                 in _elf_sections(image) if name == f".nv.info.{kernel}"), None)
    if data is None:
        raise TileInternalError(f"the cubin has no .nv.info.{kernel} section")
    params, at = {}, 0
    while at + 4 <= len(data):
        fmt, attr = data[at], data[at + 1]
        length = struct.unpack_from("<H", data, at + 2)[0] if fmt == _EIFMT_SVAL else 0
        if attr == _EIATTR_KPARAM_INFO:
            _, ordinal, offset, flags = struct.unpack_from("<IHHI", data, at + 4)
            params[ordinal] = (offset, flags >> 18)
        at += 4 + length
    return [params[i] for i in sorted(params)]
