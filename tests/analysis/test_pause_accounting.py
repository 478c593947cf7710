"""PFC (802.1Qbb) and 802.3x PAUSE accounting per (source MAC, priority)."""
from helpers.analysis import T0, analyze_rows

X, Y = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
US = 1000


def pfc(ts, enable, mac=X, **quanta):
    q = [0] * 8
    for k, v in quanta.items():
        q[int(k[1:])] = v
    return dict(proto="pfc", ts=ts, mac=mac, enable=enable, quanta=q)


def pause(ts, quanta, mac=Y):
    return dict(proto="pause", ts=ts, mac=mac, quanta=quanta)


def pfc_rows(result):
    t = result.pfc_table
    return {(m, p): dict(zip(t.columns, row)) for m, p, row in zip(t.data["src_mac"], t.data["priority"], t.text_rows())}


def scenario():
    return [
        pfc(T0, 0x08, p3=1000, p4=500),            # pause p3 5.12 us; p4's quanta: slot disabled
        pfc(T0 + 2 * US, 0x08, p3=1000),           # arrives while paused: cuts the first at 2 us
        pfc(T0 + 10 * US, 0x18, p3=0, p4=0),       # resume p3 (the second ran its full 5.12 us), p4
        pause(T0, 100),                            # 802.3x: 0.512 us
        pause(T0 + 100 * US, 0xFFFF),              # runs its full time past the end of the capture
    ]


def test_pause_time_is_quanta_times_512_bit_times_cut_by_the_next_frame():
    row = pfc_rows(analyze_rows(scenario()))[(X, "3")]
    assert {k: row[k] for k in ("pause_frames", "resume_frames", "pause_quanta", "paused_us",
                                "longest_pause_us", "first_ts", "last_ts")} == {
        "pause_frames": "2", "resume_frames": "1", "pause_quanta": "2000", "paused_us": "7.120000",
        "longest_pause_us": "7.120000", "first_ts": "1700000000.000000000", "last_ts": "1700000000.000010000"}


def test_quanta_in_a_disabled_class_slot_are_ignored():
    row = pfc_rows(analyze_rows(scenario()))[(X, "4")]
    assert {k: row[k] for k in ("pause_frames", "resume_frames", "pause_quanta", "paused_us")} == {
        "pause_frames": "0", "resume_frames": "1", "pause_quanta": "0", "paused_us": "0.000000"}
    assert set(pfc_rows(analyze_rows(scenario()))) == {(X, "3"), (X, "4"), (Y, "all")}


def test_8023x_pause_is_priority_all_and_the_last_pause_runs_its_full_time():
    row = pfc_rows(analyze_rows(scenario()))[(Y, "all")]
    # 100 quanta = 0.512 us; 65535 quanta = 335.5392 us at 100 Gb/s
    assert {k: row[k] for k in ("pause_frames", "resume_frames", "pause_quanta", "paused_us", "longest_pause_us")} == {
        "pause_frames": "2", "resume_frames": "0", "pause_quanta": "65635", "paused_us": "336.051200",
        "longest_pause_us": "335.539200"}


def test_zero_quanta_resumes_at_once():
    rows = [pfc(T0, 0x01, p0=0xFFFF), pfc(T0 + 3 * US, 0x01, p0=0), pfc(T0 + 4 * US, 0x01, p0=0)]
    row = pfc_rows(analyze_rows(rows))[(X, "0")]
    assert (row["pause_frames"], row["resume_frames"], row["paused_us"]) == ("1", "2", "3.000000")


def test_pauses_that_lapse_before_the_next_one_are_separate_periods():
    rows = [pfc(T0, 0x01, p0=100), pfc(T0 + 1 * US, 0x01, p0=100), pfc(T0 + 1200, 0x01, p0=100)]
    row = pfc_rows(analyze_rows(rows))[(X, "0")]
    # 0.512 us, then 0.2 us cut by the third, then 0.512 us: the last two form one 0.712 us period
    assert (row["paused_us"], row["longest_pause_us"]) == ("1.224000", "0.712000")


def test_link_speed_scales_the_pause_time():
    row = pfc_rows(analyze_rows([pause(T0, 1000)], link_speed_gbps=25.0))[(Y, "all")]
    assert row["paused_us"] == "20.480000"


def test_pfc_events_name_the_priority_and_quanta():
    res = analyze_rows(scenario())
    t = res.events_table
    assert list(zip(t.data["kind"], t.data["detail"]))[:3] == [
        ("pfc_pause", "priority 3 quanta 1000"), ("pfc_pause", "priority all quanta 100"),
        ("pfc_pause", "priority 3 quanta 1000")]
    assert t.data["kind"].count("pfc_resume") == 2


def test_pfc_accounting_carries_open_pauses_across_chunks():
    rows = scenario() + [pfc(T0 + 11 * US, 0x08, p3=1000), pfc(T0 + 12 * US, 0x08, p3=1000),
                         pfc(T0 + 30 * US, 0x08, p3=1000)]
    rows.sort(key=lambda r: r["ts"])
    whole = analyze_rows(rows).pfc_table.text_rows()
    for size in (1, 2, 3):
        assert analyze_rows(rows, chunk=size).pfc_table.text_rows() == whole
