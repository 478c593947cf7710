"""LLDP, for the one TLV roceview needs: the DCBX PFC configuration (which priorities are
lossless). LLDP frames are rare, so they are walked per frame in Python."""
from __future__ import annotations

TLV_END = 0
TLV_ORG_SPECIFIC = 127
OUI_IEEE_8021 = 0x0080C2
SUBTYPE_PFC_CONFIG = 0x0B        # IEEE 802.1Qaz D.2.10 (PFC configuration TLV)
OUI_DCBX_CEE = 0x001B21          # pre-standard CEE DCBX (Intel/Cisco) carries a PFC sub-TLV
CEE_SUBTYPE = 0x02
CEE_FEATURE_PFC = 3


def lldp_tlvs(frame: bytes, start: int):
    """Yield (type, value) for each TLV from `start` until End of LLDPDU."""
    pos = start
    while pos + 2 <= len(frame):
        head = int.from_bytes(frame[pos:pos + 2], "big")
        tlv_type, length = head >> 9, head & 0x1FF
        if tlv_type == TLV_END:
            return
        yield tlv_type, frame[pos + 2:pos + 2 + length]
        pos += 2 + length


def pfc_enable(frame: bytes, start: int) -> int | None:
    """PFC enable bitmap (bit p = priority p) from an IEEE or CEE DCBX TLV, or None."""
    for tlv_type, value in lldp_tlvs(frame, start):
        if tlv_type != TLV_ORG_SPECIFIC or len(value) < 4:
            continue
        oui, subtype = int.from_bytes(value[:3], "big"), value[3]
        if oui == OUI_IEEE_8021 and subtype == SUBTYPE_PFC_CONFIG and len(value) >= 6:
            return value[5]                     # willing/MBC/cap byte, then the enable bitmap
        if oui == OUI_DCBX_CEE and subtype == CEE_SUBTYPE:
            found = _cee_pfc(value[4:])
            if found is not None:
                return found
    return None


def _cee_pfc(body: bytes) -> int | None:
    pos = 0
    while pos + 2 <= len(body):
        head = int.from_bytes(body[pos:pos + 2], "big")
        sub_type, length = head >> 9, head & 0x1FF
        if sub_type == CEE_FEATURE_PFC and length >= 5:
            return body[pos + 6]                # oper ver, max ver, flags, subtype, then bitmap
        pos += 2 + length
    return None
