from memorag.memory.schedule import (
    ScheduleState,
    WindowPiece,
    entries_after,
    memory_rows_of_window,
    plan,
    positions_needed,
    reach,
    smallest_fitting_ratio,
    window_ratio,
    window_rows,
)


def test_plan_splits_at_window_boundaries_and_carries_fill():
    pieces = plan(ScheduleState(), 40, 16, lambda index: 4)
    assert [(p.raw_start, p.raw_end, p.completes_window) for p, _ in pieces] == [
        (0, 16, True),
        (16, 32, True),
        (32, 40, False),
    ]
    assert [p.num_entries for p, _ in pieces] == [0, 4, 8]
    final = pieces[-1][1]
    assert (final.num_tokens, final.num_entries, final.raw_in_window, final.window_index) == (40, 8, 8, 2)
    # continuing from the partial window: the first piece only fills it
    more = plan(final, 10, 16, lambda index: 4)
    assert [(p.raw_start, p.raw_end, p.window_offset) for p, _ in more] == [(0, 8, 8), (8, 10, 0)]


def test_plan_in_several_calls_equals_one_call():
    one = plan(ScheduleState(), 100, 16, lambda index: [2, 4, 8][index % 3])[-1][1]
    state = ScheduleState()
    for size in (7, 9, 1, 30, 53):
        state = plan(state, size, 16, lambda index: [2, 4, 8][index % 3])[-1][1]
    assert state == one


def test_entries_and_positions_arithmetic():
    assert entries_after(100, 16, 4) == 6 * 4
    # a memory token after every 4th raw token: window rows 4, 9, 14, 19 of 20
    assert memory_rows_of_window(16, 4) == [4, 9, 14, 19]
    assert window_rows(16, 4) == 20 and window_rows(7, 4) == 8 and window_rows(8, 4) == 10
    # 52 tokens: 3 compacted windows (12 entries), then a whole last window with its memory tokens
    assert positions_needed(52, 16, 4) == 12 + 20
    # 48 tokens end exactly at a window: 2 compacted windows, the third is the last one
    assert positions_needed(48, 16, 4) == 8 + 20


def test_piece_rows_interleave_memory_tokens_after_every_ratio_raw_tokens():
    whole = WindowPiece(0, 16, 4, window_offset=0, num_entries=8, completes_window=True)
    raw, memory = whole.row_kinds()
    assert memory == [4, 9, 14, 19] and sorted(raw + memory) == list(range(20))
    assert (whole.num_memory, whole.first_position) == (4, 8)
    # a piece starting after 6 raw tokens (7 rows cached: 0-3 raw, 4 memory, 5-6 raw) takes 5 more:
    # raw 6 and 7 at window rows 7, 8, memory token 1 at row 9, raw 8-10 at rows 10-12
    later = WindowPiece(0, 5, 4, window_offset=6, num_entries=8, completes_window=False)
    assert later.rows_before == 7 and later.first_position == 15
    assert later.row_kinds() == ([0, 1, 3, 4, 5], [2])
    # one token that completes a group of four brings its memory token with it
    assert WindowPiece(0, 1, 4, window_offset=3, num_entries=0, completes_window=False).row_kinds() == ([0], [1])


def test_pieces_fed_one_token_at_a_time_put_memory_tokens_at_the_rows_of_one_piece():
    state, rows = ScheduleState(), []
    for _ in range(16):
        piece, state = plan(state, 1, 16, lambda index: 4)[0]
        raw, memory = piece.row_kinds()
        rows += [("memory", piece.rows_before + m) for m in memory]
    assert [row for kind, row in rows] == memory_rows_of_window(16, 4)


def test_reach_matches_the_design_figures():
    # Qwen2-7B, P=32768, L=2048: about 125K tokens at r=4, 985K at r=32 ((P - L) * r, less one window's
    # memory tokens)
    assert reach(32768, 2048, 32) == 983_040
    assert 120_000 < reach(32768, 2048, 4) < 126_000
    for ratio in (2, 4, 8, 16, 32):
        longest = reach(8192, 1024, ratio)
        assert positions_needed(longest, 1024, ratio) <= 8192 < positions_needed(longest + 1, 1024, ratio)


def test_smallest_fitting_ratio():
    assert smallest_fitting_ratio(20_000, 8192, 1024, (2, 4, 8)) == 4
    assert smallest_fitting_ratio(10**9, 8192, 1024, (2, 4, 8)) is None


def test_step_random_ratio_is_seeded_and_varies():
    draws = [window_ratio(i, [2, 4, 8], "step-random", seed=3) for i in range(40)]
    assert draws == [window_ratio(i, [2, 4, 8], "step-random", seed=3) for i in range(40)]
    assert set(draws) == {2, 4, 8}
    assert draws != [window_ratio(i, [2, 4, 8], "step-random", seed=4) for i in range(40)]
    assert window_ratio(5, [2, 4, 8], "fixed", seed=3) == 2


def test_row_split_by_reshape_equals_row_split_by_gather():
    import torch

    from memorag.memory.schedule import RawMemoryRows

    for piece in (WindowPiece(0, 16, 4, 0, 0, True), WindowPiece(0, 8, 4, 4, 0, False), WindowPiece(0, 5, 4, 6, 0, False)):
        raw_rows, memory_rows = piece.row_kinds()
        fast = RawMemoryRows.of(raw_rows, memory_rows, torch.device("cpu"))
        slow = RawMemoryRows(fast.raw, fast.memory, fast.order, group=None)
        assert (fast.group is not None) == (piece.window_offset % 4 == 0 and piece.num_raw % 4 == 0)
        rows = torch.randn(2, piece.num_rows, 3)
        for a, b in zip(fast.split(rows), slow.split(rows), strict=True):
            assert torch.equal(a, b)
        assert torch.equal(fast.merge(*fast.split(rows)), rows)
