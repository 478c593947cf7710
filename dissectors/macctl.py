"""MAC Control frames (EtherType 0x8808): 802.3x PAUSE and 802.1Qbb PFC."""
from dissectors.fields import Field, Header

MACCTL_OPCODE_PAUSE = 0x0001   # IEEE 802.3 Annex 31B
MACCTL_OPCODE_PFC = 0x0101     # IEEE 802.1Qbb 36.1.3 (Annex 31D)
QUANTUM_BITS = 512             # one pause quantum = 512 bit times

MACCTL = Header("MACControl", "MAC Control", 2, (
    Field("opcode", 0, 16, meaning="MAC Control opcode",
          values={MACCTL_OPCODE_PAUSE: "PAUSE", MACCTL_OPCODE_PFC: "PFC (class-based flow control)"}),
), spec="IEEE 802.3 31.4")

PAUSE = Header("PAUSE", "802.3x PAUSE", 4, (
    Field("opcode", 0, 16, meaning="opcode 0x0001"),
    Field("quanta", 2, 16, column="pause_quanta", meaning="pause time, 512 bit times"),
), spec="IEEE 802.3 Annex 31B")

PFC = Header("PFC", "802.1Qbb Priority-based Flow Control", 20, (
    Field("opcode", 0, 16, meaning="opcode 0x0101"),
    Field("reserved", 2, 8, meaning="reserved (upper byte of the class-enable vector)"),
    Field("class_enable", 3, 8, column="pfc_enable", meaning="class-enable vector: bit p enables priority p"),
) + tuple(
    Field(f"quanta{p}", 4 + 2 * p, 16, column=f"pfc_quanta{p}",
          meaning=f"time for priority {p}, 512 bit times (ignored unless enabled)")
    for p in range(8)
), spec="IEEE 802.1Qbb 36.1.3")
