"""The module: original-compatible parameters and state_dict, conversion, argument errors."""

from __future__ import annotations

import io
import random

import pytest
import torch
from torch import nn

import winconv
from winconv.haar import haar_filter_bank
from wtconv_oracles import WTParams, one_pass, random_params, rel_l2


def _expected_layout(c, k, levels, bias=True):
    layout = {"wt_filter": (4 * c, 1, 2, 2), "iwt_filter": (4 * c, 1, 2, 2), "base_conv.weight": (c, 1, k, k)}
    if bias:
        layout["base_conv.bias"] = (c,)
    layout["base_scale.weight"] = (1, c, 1, 1)
    for i in range(levels):
        layout[f"wavelet_convs.{i}.weight"] = (4 * c, 1, k, k)
    for i in range(levels):
        layout[f"wavelet_scale.{i}.weight"] = (1, 4 * c, 1, 1)
    return layout


def _module_params(layer) -> WTParams:
    return WTParams(
        layer.base_conv.weight.detach().double(),
        None if layer.base_conv.bias is None else layer.base_conv.bias.detach().double(),
        layer.base_scale.weight.detach().double(),
        [w.detach().double() for w in layer.level_weights],
        [s.detach().double() for s in layer.level_scales],
    )


@pytest.mark.parametrize("bias", [True, False])
def test_state_dict_keys_shapes_and_initialisation(bias):
    layer = winconv.WTConv2d(6, 6, kernel_size=3, wt_levels=2, bias=bias)
    state = layer.state_dict()
    assert [(k, tuple(v.shape)) for k, v in state.items()] == list(_expected_layout(6, 3, 2, bias).items())
    assert not layer.wt_filter.requires_grad and not layer.iwt_filter.requires_grad
    assert isinstance(layer.wt_filter, nn.Parameter) and isinstance(layer.iwt_filter, nn.Parameter)
    assert torch.equal(layer.wt_filter, haar_filter_bank(6))
    assert torch.equal(layer.base_scale.weight, torch.ones(1, 6, 1, 1))
    for scale in layer.level_scales:
        assert torch.equal(scale, torch.full((1, 24, 1, 1), 0.1))
    trainable = {name for name, p in layer.named_parameters() if p.requires_grad}
    assert trainable == set(state) - {"wt_filter", "iwt_filter"}


def test_same_seed_gives_same_weights_as_the_original(original_wtconv2d):
    torch.manual_seed(1234)
    original = original_wtconv2d(8, 8, kernel_size=5, wt_levels=3)
    torch.manual_seed(1234)
    ours = winconv.WTConv2d(8, 8, kernel_size=5, wt_levels=3)
    theirs = original.state_dict()
    assert list(ours.state_dict()) == list(theirs)
    for key, value in ours.state_dict().items():
        assert torch.equal(value, theirs[key]), key


@pytest.mark.parametrize("height,width,levels,stride", [(13, 9, 3, 1), (7, 10, 2, 2), (5, 3, 4, 1), (16, 16, 2, 3)])
def test_original_state_dict_loads_and_outputs_match(original_wtconv2d, height, width, levels, stride):
    original = original_wtconv2d(4, 4, kernel_size=5, stride=stride, wt_levels=levels)
    with torch.no_grad():  # non-default scales so that every parameter matters
        for p in original.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn_like(p))
    ours = winconv.WTConv2d(4, 4, kernel_size=5, stride=stride, wt_levels=levels)
    ours.load_state_dict(original.state_dict())
    x = torch.randn(2, 4, height, width)
    expected = original(x)
    got = ours(x)
    assert got.shape == expected.shape
    assert rel_l2(got, expected) < 1e-5
    converted = winconv.convert_wtconv(nn.Sequential(original, nn.ReLU()))
    assert isinstance(converted[0], winconv.WTConv2d)
    assert rel_l2(converted(x), torch.relu(expected)) < 1e-5



def _random_module_configs(seed, count):
    """(B, C, H, W, k, levels, stride, bias) drawn from a fixed seed: odd and tiny planes (down to
    1 x 1, where the deeper levels see a single padded block), every supported kernel size class,
    strides 1-3."""
    rng = random.Random(seed)
    return [
        (rng.randint(1, 2), rng.randint(1, 4), rng.randint(1, 24), rng.randint(1, 24), rng.choice([1, 3, 5, 7, 9]),
         rng.randint(1, 5), rng.choice([1, 1, 2, 3]), rng.random() < 0.75)
        for _ in range(count)
    ]


@pytest.mark.parametrize("config", _random_module_configs(20261206, 24), ids=lambda c: "x".join(map(str, c)))
def test_random_shapes_match_the_original_forward_and_every_gradient(original_wtconv2d, config):
    """The drop-in claim on shapes nobody picked: the original module and ours, in float64 with the
    same parameters, give the same output, input gradient and gradient of every parameter. The
    original's Haar taps are float32 (+-0.49999997, each level scaled by 1 - 2^-23 through analysis
    and synthesis); they are set to exact halves here, as ours computes, so any difference above
    float64 rounding is a difference of semantics."""
    batch, channels, height, width, k, levels, stride, bias = config
    torch.manual_seed(sum(config))
    original = original_wtconv2d(channels, channels, kernel_size=k, stride=stride, bias=bias, wt_levels=levels)
    original = original.double()
    with torch.no_grad():  # non-default scales and weights so that every parameter matters
        for p in original.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn_like(p))
    ours = winconv.WTConv2d(channels, channels, kernel_size=k, stride=stride, bias=bias, wt_levels=levels).double()
    ours.load_state_dict(original.state_dict())
    exact = haar_filter_bank(channels).double().sign() * 0.5
    with torch.no_grad():
        original.wt_filter.copy_(exact)
        original.iwt_filter.copy_(exact)
    x = torch.randn(batch, channels, height, width, dtype=torch.float64, requires_grad=True)
    x_ours = x.detach().clone().requires_grad_(True)
    expected, got = original(x), ours(x_ours)
    assert rel_l2(got, expected) < 1e-12
    dy = torch.randn_like(expected)
    expected.backward(dy)
    got.backward(dy)
    assert rel_l2(x_ours.grad, x.grad) < 1e-12
    theirs = dict(original.named_parameters())
    for name, p in ours.named_parameters():
        reference = theirs[name].grad
        assert (p.grad is None) == (reference is None), name
        if reference is not None:
            assert rel_l2(p.grad, reference) < 1e-12, name


def test_original_layout_built_by_hand_loads():
    c, k, levels = 3, 5, 2
    state = {key: torch.randn(shape) for key, shape in _expected_layout(c, k, levels).items()}
    state["wt_filter"] = haar_filter_bank(c)
    state["iwt_filter"] = haar_filter_bank(c).double().float()
    layer = winconv.WTConv2d(c, c, kernel_size=k, wt_levels=levels)
    layer.load_state_dict(state)
    x = torch.randn(1, c, 9, 7, dtype=torch.float64)
    params = WTParams(
        state["base_conv.weight"].double(),
        state["base_conv.bias"].double(),
        state["base_scale.weight"].double(),
        [state[f"wavelet_convs.{i}.weight"].double() for i in range(levels)],
        [state[f"wavelet_scale.{i}.weight"].double() for i in range(levels)],
    )
    assert rel_l2(layer.double()(x), one_pass(x, params)) < 1e-13


def test_state_dict_round_trip_through_a_file():
    layer = winconv.WTConv2d(5, 5, kernel_size=7, wt_levels=3, stride=2)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn_like(p) * 0.01 if p.requires_grad else 0)
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    restored = winconv.WTConv2d(5, 5, kernel_size=7, wt_levels=3, stride=2)
    restored.load_state_dict(torch.load(buffer))
    x = torch.randn(2, 5, 12, 9)
    assert torch.equal(layer(x), restored(x))


@pytest.mark.parametrize("key", ["wt_filter", "iwt_filter"])
def test_loading_non_haar_filters_is_refused(key):
    layer = winconv.WTConv2d(2, 2, wt_levels=1)
    state = layer.state_dict()
    state[key] = state[key].clone()
    state[key][5, 0, 1, 1] += 0.01
    with pytest.raises(ValueError, match=f"'{key}'.*not the Haar"):
        layer.load_state_dict(state)
    state[key] = layer.state_dict()[key].clone()
    state[key][0, 0, 0, 0] = float("nan")  # fails every comparison, so no check may pass it
    with pytest.raises(ValueError, match=f"'{key}'.*not the Haar"):
        layer.load_state_dict(state)


def _original_like(stride=1, **kwargs):
    """A module with the original's attributes (and so its state_dict layout) and the winconv
    layer it was made from."""
    source = winconv.WTConv2d(3, 3, stride=stride, **kwargs)
    with torch.no_grad():
        for q in source.parameters():
            if q.requires_grad:
                q.add_(0.1 * torch.randn_like(q))
    original = nn.Module()
    for name in ("wt_filter", "iwt_filter", "base_conv", "base_scale", "wavelet_convs", "wavelet_scale"):
        setattr(original, name, getattr(source, name))
    original.stride = stride
    return original, source


def test_from_original_keeps_device_dtype_and_mode():
    original_like, _ = _original_like(kernel_size=3, wt_levels=2, bias=False)
    original_like.double().eval()
    converted = winconv.convert_wtconv(original_like)
    assert isinstance(converted, winconv.WTConv2d) and not converted.training
    assert converted.base_conv.weight.dtype == torch.float64 and converted.base_conv.bias is None
    assert converted.kernel_size == 3 and converted.wt_levels == 2


def test_module_output_matches_oracle_with_default_initialisation():
    layer = winconv.WTConv2d(3, 3, kernel_size=5, wt_levels=4).double()
    x = torch.randn(2, 3, 13, 9, dtype=torch.float64)
    assert rel_l2(layer(x), one_pass(x, _module_params(layer))) < 1e-13


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(in_channels=4, out_channels=8), "out_channels must equal in_channels"),
        (dict(kernel_size=4), "kernel_size must be odd and in \\[1, 15\\], got 4"),
        (dict(kernel_size=17), "kernel_size must be odd and in \\[1, 15\\], got 17"),
        (dict(kernel_size=0), "kernel_size must be odd"),
        (dict(wt_levels=0), "wt_levels must be in \\[1, 8\\], got 0"),
        (dict(wt_levels=9), "wt_levels must be in \\[1, 8\\], got 9"),
        (dict(wt_type="db2"), "wt_type must be 'db1'"),
        (dict(stride=0), "stride must be >= 1, got 0"),
        (dict(in_channels=0, out_channels=0), "in_channels must be >= 1"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    args = dict(in_channels=4, out_channels=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        winconv.WTConv2d(**args)


def test_non_integer_constructor_arguments():
    with pytest.raises(TypeError, match="kernel_size must be an int"):
        winconv.WTConv2d(4, 4, kernel_size=5.0)
    with pytest.raises(TypeError, match="stride must be an int"):
        winconv.WTConv2d(4, 4, stride=True)
    with pytest.raises(TypeError, match="wt_levels must be an int"):
        winconv.WTConv2d(4, 4, wt_levels=True)


def test_largest_kernel_and_deepest_levels_are_accepted():
    layer = winconv.WTConv2d(1, 1, kernel_size=15, wt_levels=8).double()
    x = torch.randn(1, 1, 9, 7, dtype=torch.float64)
    assert rel_l2(layer(x), one_pass(x, _module_params(layer))) < 1e-13


def test_extra_repr_names_every_argument():
    layer = winconv.WTConv2d(4, 4, kernel_size=3, stride=2, bias=False, wt_levels=2)
    assert layer.extra_repr() == "4, 4, kernel_size=3, stride=2, bias=False, wt_levels=2, wt_type='db1'"


def test_bad_inputs_at_forward():
    layer = winconv.WTConv2d(4, 4, wt_levels=2)
    with pytest.raises(TypeError, match="input dtype must be float32, float16, bfloat16 or float64, got torch.int64"):
        layer(torch.ones(1, 4, 8, 8, dtype=torch.int64))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        layer([[1.0]])
    with pytest.raises(ValueError, match="must be 4-D"):
        layer(torch.randn(4, 8, 8))
    with pytest.raises(ValueError, match="input has 3 channels, expected 4"):
        layer(torch.randn(1, 3, 8, 8))
    with pytest.raises(ValueError, match="height and width must be >= 1"):
        layer(torch.randn(1, 4, 0, 8))
    with pytest.raises(ValueError, match="height and width must be >= 1"):
        layer(torch.randn(1, 4, 8, 0))
    with pytest.raises(ValueError, match="input is on meta but the parameters are on cpu"):
        layer(torch.empty(1, 4, 8, 8, device="meta"))


def test_bad_functional_parameters():
    x = torch.randn(1, 2, 5, 5)
    w0, s0 = torch.randn(2, 1, 3, 3), torch.ones(1, 2, 1, 1)
    good_w, good_s = [torch.randn(8, 1, 3, 3)], [torch.ones(1, 8, 1, 1)]
    with pytest.raises(ValueError, match=r"level_weights\[0\] must have shape \(8, 1, 3, 3\), got \(8, 1, 5, 5\)"):
        winconv.wtconv2d(x, w0, None, s0, [torch.randn(8, 1, 5, 5)], good_s)
    with pytest.raises(ValueError, match="got 1 level weights but 2 level scales"):
        winconv.wtconv2d(x, w0, None, s0, good_w, good_s * 2)
    with pytest.raises(ValueError, match=r"base_bias must have shape \(2,\)"):
        winconv.wtconv2d(x, w0, torch.zeros(3), s0, good_w, good_s)
    with pytest.raises(ValueError, match="stride must be an int >= 1"):
        winconv.wtconv2d(x, w0, None, s0, good_w, good_s, stride=0)
    with pytest.raises(ValueError, match="kernel size must be odd"):
        winconv.wtconv2d(x, torch.randn(2, 1, 2, 2), None, s0, good_w, good_s)
    with pytest.raises(ValueError, match=r"base_weight must be a \(C, 1, k, k\) tensor, got \(2, 1, 3, 5\)"):
        winconv.wtconv2d(x, torch.randn(2, 1, 3, 5), None, s0, good_w, good_s)
    with pytest.raises(ValueError, match="stride must be an int >= 1, got True"):
        winconv.wtconv2d(x, w0, None, s0, good_w, good_s, stride=True)
    with pytest.raises(ValueError, match=r"number of levels must be in \[1, 8\], got 0"):
        winconv.wtconv2d(x, w0, None, s0, [], [])
    nine = random_params(2, 3, 9)
    with pytest.raises(ValueError, match=r"number of levels must be in \[1, 8\], got 9"):
        winconv.wtconv2d(x.double(), *nine.as_args())
    with pytest.raises(TypeError, match="base_scale must be a floating-point tensor"):
        winconv.wtconv2d(x, w0, None, torch.ones(1, 2, 1, 1, dtype=torch.int64), good_w, good_s)
    with pytest.raises(ValueError, match=r"level_scales\[0\] is on meta but the input is on cpu"):
        winconv.wtconv2d(x, w0, None, s0, good_w, [torch.ones(1, 8, 1, 1, device="meta")])


def test_empty_batch():
    layer = winconv.WTConv2d(2, 2, wt_levels=2, stride=2)
    x = torch.randn(0, 2, 7, 5, requires_grad=True)
    y = layer(x)
    assert y.shape == (0, 2, 4, 3)
    y.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("stride", [1, 2])
def test_channels_last_tensors_match_contiguous_ones(stride):
    """The CPU path on a channels-last input and a channels-last output gradient: the values of the
    contiguous tensors (PyTorch's convolutions take either layout; nothing is read as NCHW)."""
    layer = winconv.WTConv2d(8, 8, kernel_size=3, wt_levels=2, stride=stride).double()
    x = torch.randn(2, 8, 11, 14, dtype=torch.float64)
    grad_y = torch.randn(2, 8, -(-11 // stride), -(-14 // stride), dtype=torch.float64)
    params = [p for p in layer.parameters() if p.requires_grad]

    def run(xi, gi):
        xi = xi.clone().requires_grad_(True)
        y = layer(xi)
        return [y, *torch.autograd.grad(y, [xi, *params], gi)]

    expected = run(x, grad_y)
    assert rel_l2(expected[0], one_pass(x, _module_params(layer), stride)) < 1e-13
    cl = torch.channels_last
    for xi, gi in ((x.to(memory_format=cl), grad_y), (x, grad_y.to(memory_format=cl))):
        for got, want in zip(run(xi, gi), expected):
            assert rel_l2(got, want) < 1e-13


def test_float16_input_on_cpu_is_computed_in_float32():
    layer = winconv.WTConv2d(3, 3, wt_levels=2)
    x = torch.randn(1, 3, 8, 7).half()
    y = layer(x)
    assert y.dtype == torch.float16
    assert torch.equal(y, layer(x.float()).half())


def test_float64_stays_float64_under_autocast():
    layer = winconv.WTConv2d(2, 2, wt_levels=2).double()
    x = torch.randn(1, 2, 7, 6, dtype=torch.float64)
    expected = layer(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    assert y.dtype == torch.float64 and torch.equal(y, expected)


def test_strided_output_is_contiguous():
    layer = winconv.WTConv2d(2, 2, wt_levels=1, stride=2)
    assert layer(torch.randn(1, 2, 8, 8)).is_contiguous()


def test_meta_tensors_give_the_output_shape():
    layer = winconv.WTConv2d(3, 3, kernel_size=5, wt_levels=2, stride=2).to("meta")
    y = layer(torch.empty(1, 3, 9, 8, device="meta"))
    assert y.device.type == "meta" and tuple(y.shape) == (1, 3, 5, 4)


def test_haar_alias_and_numpy_integer_arguments():
    np = pytest.importorskip("numpy")
    layer = winconv.WTConv2d(np.int64(3), np.int64(3), kernel_size=np.int32(3), wt_levels=np.int64(2), wt_type="haar")
    assert type(layer.kernel_size) is int and type(layer.wt_levels) is int
    reference = winconv.WTConv2d(3, 3, kernel_size=3, wt_levels=2)
    reference.load_state_dict(layer.state_dict())  # pywt's 'haar' is the db1 filter bank
    x = torch.randn(1, 3, 7, 6)
    assert torch.equal(layer(x), reference(x))


def test_conversion_leaves_one_dimensional_look_alikes_alone():
    """The original repository's WTConv1d has the same attribute names with 1-D convolutions."""
    source = winconv.WTConv2d(2, 2, kernel_size=3, wt_levels=1)
    two_d = nn.Module()
    for name in ("wt_filter", "iwt_filter", "base_conv", "base_scale", "wavelet_convs", "wavelet_scale"):
        setattr(two_d, name, getattr(source, name))
    one_d = nn.Module()
    for name in ("wt_filter", "iwt_filter", "base_scale", "wavelet_convs", "wavelet_scale"):
        setattr(one_d, name, torch.zeros(1))
    one_d.base_conv = nn.Conv1d(2, 2, 3, padding=1, groups=2)
    converted = winconv.convert_wtconv(nn.Sequential(two_d, one_d))
    assert isinstance(converted[0], winconv.WTConv2d)
    assert converted[1] is one_d


def test_same_seed_gives_the_original_construction_order():
    """Without the original checkout: the original builds its base conv, then each level's conv,
    under the caller's seed; the same seed gives the same weights here."""
    c, k, levels = 4, 5, 3
    torch.manual_seed(7)
    base = nn.Conv2d(c, c, k, padding="same", groups=c)
    level_convs = [nn.Conv2d(4 * c, 4 * c, k, padding="same", groups=4 * c, bias=False) for _ in range(levels)]
    torch.manual_seed(7)
    layer = winconv.WTConv2d(c, c, kernel_size=k, wt_levels=levels)
    assert torch.equal(layer.base_conv.weight, base.weight) and torch.equal(layer.base_conv.bias, base.bias)
    for ours, theirs in zip(layer.level_weights, level_convs):
        assert torch.equal(ours, theirs.weight)


def test_from_original_and_conversion_keep_the_outputs_and_stride():
    x = torch.randn(1, 3, 9, 8)
    original, source = _original_like(kernel_size=3, wt_levels=2)
    converted = winconv.WTConv2d.from_original(original)
    assert isinstance(converted, winconv.WTConv2d) and torch.equal(converted(x), source(x))
    original, source = _original_like(stride=2, kernel_size=3, wt_levels=2)
    converted = winconv.convert_wtconv(original)
    assert converted.stride == 2 and converted(x).shape == (1, 3, 5, 4)
    assert torch.equal(converted(x), source(x))


def test_conversion_recurses_and_leaves_winconv_layers_alone():
    original, _ = _original_like(kernel_size=3, wt_levels=1)
    model = winconv.convert_wtconv(nn.Sequential(nn.Sequential(nn.Identity(), original)))
    assert isinstance(model[0][1], winconv.WTConv2d)
    layer = winconv.WTConv2d(2, 2, wt_levels=1)
    assert winconv.convert_wtconv(layer) is layer
    assert winconv.convert_wtconv(nn.Sequential(layer))[0] is layer


def test_conversion_refuses_a_malformed_look_alike():
    original, _ = _original_like(kernel_size=3, wt_levels=2)
    original.wavelet_convs.append(nn.Conv2d(12, 12, 3, padding=1, groups=12, bias=False))  # 3 convs, 2 scales
    with pytest.raises(RuntimeError, match="Missing key.*wavelet_scale.2"):
        winconv.convert_wtconv(original)
