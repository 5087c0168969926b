"""The benchmark's pieces that need no GPU: shapes, weight mapping, byte model, report."""

from __future__ import annotations

import copy
import csv
import json
import math
import sys

import pytest
import torch

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))
import plot_wtconv  # noqa: E402
import wtconv_bench  # noqa: E402

import winconv  # noqa: E402


def test_reads_the_shapes_file():
    shapes = wtconv_bench.read_shapes(REPO_ROOT / "bench" / "wtconv_shapes.csv")
    names = [s.name for s in shapes]
    assert "big_L2" in names and len(names) == len(set(names))
    big = shapes[names.index("big_L2")]
    assert (big.batch, big.channels, big.height, big.width) == (16, 128, 512, 512)


def test_every_shape_file_reads_and_the_drawn_sets_match_their_rule():
    for path in sorted((REPO_ROOT / "bench").glob("wtconv_shapes*.csv")):
        names = [s.name for s in wtconv_bench.read_shapes(path)]
        assert names and len(names) == len(set(names)), path.name
    # Sets 7 and 8 name the seed and prefix they were drawn with; the script must still draw them.
    sys.path.insert(0, str(REPO_ROOT / "dev" / "python"))
    import draw_wtconv_shapes

    for name, seed, prefix in (("wtconv_shapes_unseen7.csv", 61207, "q"), ("wtconv_shapes_unseen8.csv", 81206, "r")):
        rows = [line for line in (REPO_ROOT / "bench" / name).read_text().splitlines() if not line.startswith("#")]
        assert rows[1:] == draw_wtconv_shapes.draw(seed, 10, prefix), name


def test_stride_column_is_optional(tmp_path):
    path = tmp_path / "shapes.csv"
    path.write_text("# comment\nname,B,C,H,W,kernel_size,wt_levels,stride\na,2,3,9,10,5,2,2\nb,1,4,8,8,3,1,\n")
    a, b = wtconv_bench.read_shapes(path)
    assert (a.stride, b.stride) == (2, 1)
    assert a.out_dims == (2, 3, 5, 5) and b.out_dims == (1, 4, 8, 8)
    assert all(s.stride == 1 for s in wtconv_bench.read_shapes(REPO_ROOT / "bench" / "wtconv_shapes.csv"))
    path.write_text("name,B,C,H,W,kernel_size,wt_levels,stride\na,2,3,9,10,5,2,0\n")
    with pytest.raises(ValueError, match="stride must be >= 1"):
        wtconv_bench.read_shapes(path)


def test_only_selects_shapes_and_refuses_unknown_names(tmp_path):
    path = tmp_path / "shapes.csv"
    path.write_text("name,B,C,H,W,kernel_size,wt_levels\na,1,4,8,8,5,1\nb,1,4,8,8,3,2\nc,2,4,9,9,5,1\n")
    shapes = wtconv_bench.read_shapes(path)
    assert [s.name for s in wtconv_bench.select_shapes(shapes, "")] == ["a", "b", "c"]
    assert [s.name for s in wtconv_bench.select_shapes(shapes, "c,a")] == ["a", "c"]
    with pytest.raises(ValueError, match="names no shape here: x, z"):
        wtconv_bench.select_shapes(shapes, "a,z,x")
    # The command refuses it before it looks for a GPU or writes anything.
    out = tmp_path / "out"
    assert wtconv_bench.main(["--shapes", str(path), "--only", "a,nope", "--out", str(out)]) == 2
    assert not out.exists()


def test_official_layout_mapping_covers_every_parameter():
    ours = winconv.WTConv2d(4, 4, kernel_size=5, wt_levels=3).state_dict()
    official_keys = ["base_weight", "base_scale", "base_bias"] + [f"wt_weights.{i}" for i in range(3)] + [
        f"wt_scales.{i}" for i in range(3)
    ]
    mapped = wtconv_bench.official_state_dict(ours, official_keys)
    assert list(mapped) == official_keys
    assert mapped["wt_weights.2"] is ours["wavelet_convs.2.weight"]
    assert mapped["base_bias"] is ours["base_conv.bias"]
    # A module with the original layout gets the state_dict unchanged.
    assert wtconv_bench.official_state_dict(ours, list(ours)) == ours
    with pytest.raises(KeyError):
        wtconv_bench.official_state_dict(ours, ["something_else"])


def test_official_kernel_ceiling_covers_the_largest_kernel_size():
    def shapes(*ks):
        return [wtconv_bench.Shape(f"s{k}", 1, 2, 8, 8, k, 1) for k in ks]

    assert wtconv_bench.official_kernel_ceiling(shapes(3, 5, 7), environ={}) is None
    assert wtconv_bench.official_kernel_ceiling(shapes(5, 11, 9), environ={}) == 11
    # A ceiling the user set is kept, whatever the shapes.
    assert wtconv_bench.official_kernel_ceiling(shapes(13), environ={"HAAR_MAX_K": "9"}) is None
    assert wtconv_bench.official_kernel_ceiling([], environ={}) is None


def test_floor_byte_model():
    shape = wtconv_bench.Shape("s", 2, 3, 5, 7, 5, 2)
    fwd, train, model = wtconv_bench.kernel_bytes(shape, torch.float16)
    if model == "floor":
        assert (fwd, train) == (2 * 210 * 2, 5 * 210 * 2)
    strided = wtconv_bench.Shape("s", 2, 3, 5, 7, 5, 2, 2)  # 3 x 4 outputs per plane
    fwd, train, model = wtconv_bench.kernel_bytes(strided, torch.float16)
    if model == "floor":
        assert (fwd, train) == ((210 + 72) * 2, (3 * 210 + 2 * 72) * 2)


def test_argument_checks():
    with pytest.raises(SystemExit):
        wtconv_bench.parse_args(["--iters", "5"])
    with pytest.raises(SystemExit):
        wtconv_bench.parse_args(["--dtypes", "fp8"])
    args = wtconv_bench.parse_args(["--impls", "winconv,depthwise7x7", "--dtypes", "bf16"])
    assert args.impls == ["winconv", "depthwise7x7"] and args.dtypes == ["bf16"]
    assert args.commit and " " not in args.commit  # this checkout's commit, or "unknown"
    assert wtconv_bench.parse_args(["--commit", "abc1234"]).commit == "abc1234"
    with pytest.raises(SystemExit):
        wtconv_bench.parse_args(["--eager-rounds", "0"])
    assert wtconv_bench.parse_args([]).eager_rounds == 3


def test_eager_rounds_keep_each_implementations_lowest_median():
    # Two more rounds, the implementations in turn: each keeps its lowest fwd and train median,
    # and an implementation that failed in the first round is not timed again.
    # Steps of HOST_BOUND_MS or more (depthwise7x7's training step here) are not re-timed.
    timings = {"winconv": [(0.9, 3.0), (1.1, 1.5)], "depthwise7x7": [(2.0, 4.5), (2.5, 4.0)]}
    calls = []

    class FakeBench:
        def eager_times(self, module, fwd_too, train_too):
            calls.append((module, fwd_too, train_too))
            fwd, train = timings[module].pop(0)
            return (fwd if fwd_too else None), (train if train_too else None)

    constructors = {impl: (lambda impl=impl: impl) for impl in ("winconv", "depthwise7x7", "official_fused")}
    results = [wtconv_bench.Result("s", "fp32", impl) for impl in constructors]
    results[0].values.update(fwd_ms=1.0, train_ms=2.0)
    results[1].values.update(fwd_ms=2.2, train_ms=wtconv_bench.HOST_BOUND_MS)
    results[2].values.update(error="failed")
    wtconv_bench.eager_rounds(FakeBench(), constructors, results, 2)
    assert calls == [("winconv", True, True), ("depthwise7x7", True, False)] * 2
    assert (results[0].values["fwd_ms"], results[0].values["train_ms"]) == (0.9, 1.5)
    assert (results[1].values["fwd_ms"], results[1].values["train_ms"]) == (2.0, wtconv_bench.HOST_BOUND_MS)
    assert "fwd_ms" not in results[2].values


def test_report_from_a_results_folder(tmp_path):
    shapes = wtconv_bench.read_shapes(REPO_ROOT / "bench" / "wtconv_shapes.csv")[:2] + [
        wtconv_bench.Shape("big_L2", 16, 128, 512, 512, 5, 2)
    ]
    env = {"gpu": "test GPU", "torch": torch.__version__, "cuda": None, "cudnn": None, "date": "today",
           "commit": "abc1234",
           "winconv_kernels": "fused", "copy_GBps": 4000.0, "l2_bytes": 50 * 2**20, "iters": 20, "eager_rounds": 3,
           "shapes": {s.name: vars(s) for s in shapes}}
    (tmp_path / "wtconv_env.json").write_text(json.dumps(env))
    with (tmp_path / "wtconv_extra.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=wtconv_bench.EXTRA_COLUMNS)
        writer.writeheader()
        for dtype in ("fp32", "bf16"):
            for i, s in enumerate(shapes):
                for j, impl in enumerate(("winconv", "official_fused", "depthwise7x7")):
                    writer.writerow({"shape": s.name, "dtype": dtype, "impl": impl, "fwd_ms": 1.0 + i + j,
                                     "train_ms": 2.0 + i + 2 * j, "peak_bytes": 2**20, "rel_err": 1e-7,
                                     "fwd_bytes": 100, "train_bytes": 250, "bytes_model": "floor",
                                     "fwd_GBps": 1.0, "train_GBps": 1.0})
    rows, env_loaded, table = plot_wtconv.load(tmp_path)
    text = plot_wtconv.summary_markdown(rows, env_loaded, table)
    assert "## fp32" in text and "## bf16" in text and "## fp16" not in text
    assert "**geomean**" in text and "big_L2: against the I/O floor" in text
    assert "commit abc1234" in text
    assert "the lowest of 3 such medians" in text
    assert "| 2.00 |" in text  # official_fused fwd ratio of the first shape: 2.0 / 1.0
    assert "No FP32 rate recorded" in text  # this env has none
    pytest.importorskip("matplotlib")
    plot_wtconv.write_report(tmp_path)
    assert (tmp_path / "wtconv.png").stat().st_size > 0


def test_floor_against_the_fp32_rate():
    shape = wtconv_bench.Shape("big_L2", 16, 128, 512, 512, 5, 2)
    env = {"copy_GBps": 4000.0, "fp32_TFLOPS": 66.9, "fp32_rate_source": "test", "shapes": {"big_L2": vars(shape)}}
    table = {("fp32", "big_L2"): {"winconv": {"train_ms": "5.418"}}}
    fwd_flops = plot_wtconv.flop_count(vars(shape))
    n = 16 * 128 * 512 * 512
    text = "\n".join(plot_wtconv._floor_lines(env, table, n, fwd_flops))
    flop_ms = 3 * fwd_flops / 66.9e12 * 1e3  # 2.709 ms, above the byte floor 10.7e9 / 4e12 = 2.684 ms
    assert f"| {flop_ms:.3f} | {flop_ms:.3f} | 5.418 | {5.418 / flop_ms:.2f} |" in text
    # The phases one after the other: the forward bound by its bytes (2N x 4 B = 1.074 ms against
    # 0.903 ms of FLOPs), the backward by its FLOPs (1.806 ms against 3N x 4 B = 1.611 ms).
    phases = 2 * n * 4 / 4000e9 * 1e3 + 2 * fwd_flops / 66.9e12 * 1e3
    assert f"| 5.418 | {5.418 / flop_ms:.2f} | {phases:.3f} | {5.418 / phases:.2f} |" in text


def test_a_timed_winconv_row_passes_only_with_finite_checked_errors():
    def row(impl="winconv", dtype="fp32", **values):
        return wtconv_bench.Result("s", dtype, impl, dict(fwd_ms=1.0, train_ms=2.0, **values))

    good = row(rel_err_f64=1e-7, grad_rel_err_f64=2e-7)
    nan_grad = row(rel_err_f64=1e-7, grad_rel_err_f64=float("nan"))
    unchecked_grad = row(rel_err_f64=1e-7)  # the gradient check raised before writing its value
    half_ok = row(dtype="fp16", rel_err_f64=3e-3, grad_rel_err_f64=4e-3)
    half_bad = row(dtype="bf16", rel_err_f64=3e-3, grad_rel_err_f64=2e-2)
    other = row(impl="official_fused", rel_err_f64=float("nan"))  # reported, not gated
    not_run = wtconv_bench.Result("s", "fp32", "winconv", {"error": "RuntimeError: boom"})
    failed, inaccurate = wtconv_bench.problems([good, nan_grad, unchecked_grad, half_ok, half_bad, other, not_run],
                                               f64_check=True)
    assert failed == [not_run]
    assert inaccurate == [nan_grad, unchecked_grad, half_bad]
    assert wtconv_bench.problems([nan_grad], f64_check=False) == ([], [])


# ---------------------------------------------------------------------------------------------
# rel_err and the accuracy gate


def test_rel_l2_is_relative_to_the_reference_and_nan_when_not_finite():
    out, ref = torch.tensor([1.0, 0.0], dtype=torch.float16), torch.tensor([2.0, 0.0], dtype=torch.float64)
    assert wtconv_bench.rel_l2(out, ref) == pytest.approx(0.5)  # |out - ref| / |ref|, not / |out| (1.0)
    for bad in (float("nan"), float("inf")):
        assert math.isnan(wtconv_bench.rel_l2(torch.tensor([1.0, bad]), ref))


def test_gate_bounds_are_the_documented_ones():
    # DESIGN.md: FP32 at most 1e-5, FP16/BF16 at most 1e-2; at the bound passes, above it fails.
    def row(dtype, err):
        return wtconv_bench.Result("s", dtype, "winconv", dict(fwd_ms=1.0, train_ms=2.0, rel_err_f64=err,
                                                               grad_rel_err_f64=err))

    at = [row("fp32", 1e-5), row("fp16", 1e-2), row("bf16", 1e-2)]
    above = [row("fp32", 2e-5), row("fp16", 1.1e-2), row("bf16", 1.1e-2)]
    assert wtconv_bench.problems(at + above, f64_check=True) == ([], above)


def test_failed_baselines_are_reported():
    broken = wtconv_bench.Result("s", "fp16", "official_fused", {"error": "RuntimeError: nvcc"})
    failed, inaccurate = wtconv_bench.problems([broken], f64_check=True)
    assert failed == [broken] and inaccurate == []


def test_the_run_fails_on_winconv_rows_only():
    ours = wtconv_bench.Result("s", "fp32", "winconv", {"error": "RuntimeError: launch"})
    baseline = wtconv_bench.Result("s", "fp32", "official_fused", {"error": "RuntimeError: nvcc"})
    assert wtconv_bench.exit_status([], []) == 0
    assert wtconv_bench.exit_status([baseline], []) == 0
    assert wtconv_bench.exit_status([ours], []) == 1
    assert wtconv_bench.exit_status([], [ours]) == 1


def test_achieved_bandwidth_is_bytes_over_time_in_gb_per_second():
    assert wtconv_bench.achieved_gbps(10_737_418_240, 2.5) == pytest.approx(4294.967296)
    assert wtconv_bench.achieved_gbps(4_000_000, 0.001) == pytest.approx(4000.0)


# ---------------------------------------------------------------------------------------------
# Result files


def test_result_files_follow_the_documented_format(tmp_path):
    design = (REPO_ROOT / "docs" / "DESIGN.md").read_text()
    documented = next(line.split(":", 1)[1].strip() for line in design.splitlines()
                      if line.strip().startswith("wtconv.csv:"))
    assert ",".join(wtconv_bench.MAIN_COLUMNS) == documented
    assert wtconv_bench.EXTRA_COLUMNS[:len(wtconv_bench.MAIN_COLUMNS)] == wtconv_bench.MAIN_COLUMNS

    ours = wtconv_bench.Result("s", "fp32", "winconv",
                               dict(fwd_ms=0.2392, train_ms=0.6888, peak_bytes=235161088, rel_err=1.464e-07))
    nan = wtconv_bench.Result("s", "fp16", "winconv", dict(fwd_ms=0.5, train_ms=1.25, peak_bytes=7, rel_err=float("nan")))
    broken = wtconv_bench.Result("s", "fp32", "official_fused", {"error": "RuntimeError: boom"})
    main, extra = tmp_path / "wtconv.csv", tmp_path / "wtconv_extra.csv"
    wtconv_bench.write_csv(main, wtconv_bench.MAIN_COLUMNS, [ours, nan, broken], only_measured=True)
    wtconv_bench.write_csv(extra, wtconv_bench.EXTRA_COLUMNS, [ours, nan, broken], only_measured=False)
    assert main.read_text().splitlines()[0] == documented
    rows = list(csv.DictReader(main.open()))
    assert [(r["dtype"], r["impl"]) for r in rows] == [("fp32", "winconv"), ("fp16", "winconv")]  # measured only
    assert (float(rows[0]["fwd_ms"]), float(rows[0]["train_ms"]), int(rows[0]["peak_bytes"])) == (0.2392, 0.6888, 235161088)
    assert float(rows[0]["rel_err"]) == pytest.approx(1.464e-07, rel=1e-3)  # small errors keep their digits
    assert rows[1]["rel_err"] == "nan"  # a NaN error stays visible
    extra_rows = list(csv.DictReader(extra.open()))
    assert [r["impl"] for r in extra_rows] == ["winconv", "winconv", "official_fused"]
    assert extra_rows[2]["error"] == "RuntimeError: boom"


# ---------------------------------------------------------------------------------------------
# Inputs and baselines' weights


def test_shapes_keep_height_and_width_apart(tmp_path):
    path = tmp_path / "shapes.csv"
    path.write_text("name,B,C,H,W,kernel_size,wt_levels\nwide,1,2,8,24,5,1\n")
    (s,) = wtconv_bench.read_shapes(path)
    assert (s.height, s.width, s.out_dims) == (8, 24, (1, 2, 8, 24))


def test_official_layout_mapping_maps_each_parameter_to_its_own_tensor():
    ours = winconv.WTConv2d(4, 4, kernel_size=5, wt_levels=3).state_dict()
    expected = {"base_weight": "base_conv.weight", "base_scale": "base_scale.weight", "base_bias": "base_conv.bias"}
    for level in range(3):
        expected[f"wt_weights.{level}"] = f"wavelet_convs.{level}.weight"
        expected[f"wt_scales.{level}"] = f"wavelet_scale.{level}.weight"
    mapped = wtconv_bench.official_state_dict(ours, list(expected))
    assert {k: next(name for name, t in ours.items() if t is v) for k, v in mapped.items()} == expected


# ---------------------------------------------------------------------------------------------
# The float64 oracle


def test_float64_oracle_matches_the_module_and_its_input_gradient():
    torch.manual_seed(1)
    layer = winconv.WTConv2d(3, 3, kernel_size=5, stride=2, wt_levels=2)
    with torch.no_grad():  # every parameter random, signs included
        for p in layer.parameters():
            p.copy_(torch.randn_like(p))
    x = torch.randn(2, 3, 9, 10)
    gy = torch.randn(2, 3, 5, 5)
    y, gx = wtconv_bench.float64_reference(layer, x, gy)
    layer64 = copy.deepcopy(layer).double()
    x64 = x.double().requires_grad_(True)
    out = layer64(x64)
    out.backward(gy.double())
    assert y.dtype == gx.dtype == torch.float64
    assert gx.shape == x.shape
    assert wtconv_bench.rel_l2(y, out.detach()) < 1e-12
    assert wtconv_bench.rel_l2(gx, x64.grad) < 1e-12


# ---------------------------------------------------------------------------------------------
# FLOP count and the summary's figures


def test_flop_count_is_two_per_multiply_add_over_ceil_halved_levels():
    # 1x1x5x7, k = 3, 2 levels: base 35 outputs, level 1 4 x 3x4, level 2 4 x 2x2 (ceil halving).
    shape = dict(batch=1, channels=1, height=5, width=7, kernel_size=3, wt_levels=2)
    assert plot_wtconv.flop_count(shape) == 2 * 9 * (35 + 4 * 12 + 4 * 4)
    big = dict(batch=16, channels=128, height=512, width=512, kernel_size=5, wt_levels=2)
    n = 16 * 128 * 512 * 512
    assert plot_wtconv.flop_count(big) == 2 * 25 * (n + n + n // 4)


def _table(text, header_start):
    """Rows (lists of cells) of the markdown table whose header starts with `header_start`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_summary_figures(tmp_path):
    shapes = [wtconv_bench.Shape("a", 1, 4, 8, 8, 5, 1), wtconv_bench.Shape("b", 1, 4, 16, 16, 5, 1),
              wtconv_bench.Shape("big_L2", 16, 128, 512, 512, 5, 2)]
    env = {"gpu": "test GPU", "torch": "x", "cuda": None, "cudnn": None, "date": "today", "commit": "abc1234",
           "winconv_kernels": "fused", "copy_GBps": 4000.0, "l2_bytes": 50 * 2**20, "iters": 20, "eager_rounds": 3,
           "shapes": {s.name: vars(s) for s in shapes}}
    (tmp_path / "wtconv_env.json").write_text(json.dumps(env))
    # winconv 1, 2, 4 ms forward; official_fused 2, 1, 4 ms: ratios 2, 0.5, 1 -> geomean 1.
    ours_fwd, official_fwd = [1.0, 2.0, 4.0], [2.0, 1.0, 4.0]
    with (tmp_path / "wtconv_extra.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=wtconv_bench.EXTRA_COLUMNS)
        writer.writeheader()
        for i, s in enumerate(shapes):
            writer.writerow({"shape": s.name, "dtype": "fp32", "impl": "winconv", "fwd_ms": ours_fwd[i],
                             "train_ms": 2 * ours_fwd[i], "peak_bytes": 3 * 2**20, "rel_err": "1.5e-07",
                             "bytes_model": "floor"})
            writer.writerow({"shape": s.name, "dtype": "fp32", "impl": "official_fused", "fwd_ms": official_fwd[i],
                             "train_ms": 2 * official_fwd[i], "peak_bytes": 9 * 2**20, "rel_err": "2e-03"})
            writer.writerow({"shape": s.name, "dtype": "fp32", "impl": "depthwise7x7", "fwd_ms": 1.0,
                             "train_ms": 2.0, "peak_bytes": 5 * 2**20})
    text = plot_wtconv.summary_markdown(*plot_wtconv.load(tmp_path))

    rows = {r[0]: r for r in _table(text, "| shape |")}
    assert rows["a"][4:7] == ["3.0", "1.5e-07", "2.00"]  # winconv's peak MiB and rel_err; official fwd ratio
    assert rows["b"][6] == "0.50"  # winconv slower here
    assert rows["**geomean**"][6:8] == ["1.00", "1.00"]  # geomean of 2, 0.5, 1 over every shape

    n = 16 * 128 * 512 * 512
    floor = {r[0]: r for r in _table(text, "| dtype | fwd floor bytes |")}["fp32"]
    fwd_bytes, train_bytes = 2 * n * 4, 5 * n * 4  # x + y; x, y, x, dY, dx
    fwd_flops = 2 * 25 * (n + n + n // 4)
    assert floor[1] == f"{fwd_bytes:,}" and floor[5] == f"{train_bytes:,}"
    assert floor[2] == f"{fwd_bytes / 4000e9 * 1e3:.3f}" and floor[6] == f"{train_bytes / 4000e9 * 1e3:.3f}"
    assert floor[10] == f"{3 * fwd_flops / 8e-3 / 1e12:.2f}"  # TFLOPS of the 8 ms training step
