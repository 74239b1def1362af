"""A whole model's capture, in this process: each norm instance's first input stored by its hash, the float64
model's output beside eager's, the outliers planted where the residual stream starts, the budget kept."""
import numpy as np

from harness.core import captured
from harness.engine.model_capture import ModelTarget, Outliers, capture
from harness.spec import CaseSpec

SPEC = CaseSpec.from_dict({"class": "user_models:TinyMixer", "init": {"width": 8, "groups": 2}, "dtype": "float16",
                           "shape": [2, 4, 8]}).to_dict()


def test_each_instance_is_captured_by_its_hash_in_model_order(tmp_path):
    cap = capture(ModelTarget(SPEC, None, str(tmp_path), paths=("eager",)))
    assert cap.problem is None and [i.path for i in cap.instances] == ["norm_in", "group", "norm_out"]
    for inst in cap.instances:
        x = captured.load(inst.sha256, inst.shape, inst.dtype, [str(tmp_path)])
        assert inst.dtype == "float16" and inst.calls == 1
        assert inst.max_abs == float(np.max(np.abs(x.astype(np.float64))))
    assert cap.instances[1].shape == (2, 8, 4)  # the GroupNorm's own input: (N, C, L)
    assert [w.path for w in cap.whole] == ["eager"] and 0 < cap.whole[0].rel_err < 1e-2


def test_outliers_are_planted_in_the_chosen_channels_and_tokens(tmp_path):
    cap = capture(ModelTarget(SPEC, None, str(tmp_path), outliers=Outliers(1e4, (1, 5), (0, 2))))
    planted = cap.planted
    assert planted["channels"] == [1, 5] and planted["tokens"] == [0, 2] and planted["where"] == "the model's input x"
    x = captured.load(cap.instances[0].sha256, (2, 4, 8), "float16", [str(tmp_path)]).astype(np.float64)
    value = float(np.float16(planted["value"]))
    assert np.all(x[:, [0, 2]][:, :, [1, 5]] == value) and abs(value - 1e4 * planted["median"]) < 1e4 * 0.01 * \
        planted["median"]


def test_activations_over_the_budget_stop_the_capture_in_one_line(tmp_path):
    cap = capture(ModelTarget(SPEC, None, str(tmp_path), budget=200))  # 128 bytes an instance
    assert cap.problem.startswith("the captured activations outgrow --max-memory") and "instance group" in cap.problem
    first, stopped = cap.instances[0], cap.instances[1]
    assert cap.whole == () and [p.name for p in tmp_path.iterdir()] == [first.sha256 + captured.SUFFIX]  # kept
    assert stopped.sha256 is None and stopped.note == "not captured: the capture stopped"
