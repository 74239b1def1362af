"""A model's report: its instances in model order with per-path verdicts and error over bound, the first over its
bound per path, the whole model without a verdict; report.html's plot of the instances along the model."""
from harness.reports.html import report_html
from harness.reports.model_view import first_over, instance_records, model_table

ABOUT = {"target": "m:M", "dtype": "float16", "paths": ["eager", "p"], "outliers": None, "problem": None,
         "instances": [{"path": "layers.10.norm", "cls": "torch:LayerNorm", "dtype": "float16", "shape": [1, 4, 8],
                        "max_abs": 3.5, "case_id": "b", "note": ""},
                       {"path": "layers.2.norm", "cls": "torch:LayerNorm", "dtype": "float16", "shape": [1, 4, 8],
                        "max_abs": 2.0, "case_id": "a", "note": ""},
                       {"path": "head", "cls": "m:Odd", "note": "its input is not a floating tensor"}],
         "whole": [{"path": "eager", "rel_err": 1e-3, "max_abs_err": 2e-3, "out_dtype": "float16", "failure": None},
                   {"path": "p", "failure": "run: it broke"}]}


def record(case_id, instance, path, verdict, over):
    return {"case_id": case_id, "path": path, "verdict": verdict, "max_err_over_tol": over, "message": "",
            "case": {"class": "m:M", "instance": instance, "pattern": "layer_norm", "style": "class",
                     "dtype": "float16", "shape": [1, 4, 8], "input": {"kind": "captured", "sha256": "0" * 64}}}


RECORDS = [record("a", "layers.2.norm", "eager", "pass", 0.2), record("a", "layers.2.norm", "p", "inaccurate", 40.0),
           record("b", "layers.10.norm", "eager", "pass", 0.1), record("b", "layers.10.norm", "p", "pass", 0.3)]


def test_the_table_keeps_the_models_order_and_names_the_first_instance_over_its_bound():
    text = model_table(ABOUT, RECORDS)
    assert text.index("`layers.10.norm`") < text.index("`layers.2.norm`") < text.index("`head`")
    assert "| inaccurate 40 |" in text and "its input is not a floating tensor" in text
    assert first_over(ABOUT, RECORDS) == {"eager": None, "p": "layers.2.norm"}
    assert "* `p`: `layers.2.norm`" in text and "run: it broke" in text and "no verdict" in text


def test_report_html_plots_the_instances_of_each_model_in_module_order():
    assert list(instance_records(RECORDS)["m:M"]) == ["layers.2.norm", "layers.10.norm"]
    page = report_html(RECORDS)
    assert "Norm instances of m:M (2)" in page and 'alt="instances of m:M"' in page
    assert "Norm instances of" not in report_html([{**r, "case": {k: v for k, v in r["case"].items()
                                                                 if k != "instance"}} for r in RECORDS])
