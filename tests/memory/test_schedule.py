from memorag.memory.schedule import (
    ScheduleState,
    entries_after,
    memory_token_offsets,
    plan,
    positions_needed,
    reach,
    smallest_fitting_ratio,
    window_ratio,
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
    assert memory_token_offsets(16, 4) == [3, 7, 11, 15]
    # 52 tokens: 3 compacted windows (12 entries), then a whole last window of room
    assert positions_needed(52, 16, 4) == 12 + 16
    # 48 tokens end exactly at a window: 2 compacted windows, the third is the last one
    assert positions_needed(48, 16, 4) == 8 + 16


def test_reach_matches_the_design_figures():
    # MEMORY_MODEL.md: Qwen2-7B, P=32768, L=2048: about 125K tokens at r=4, 985K at r=32
    assert reach(32768, 2048, 32) == 985_088
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
