"""The conditions a benchmark records (``ladder.core.conditions``): nvidia-smi's lines parsed,
throttle reasons named, the spread of samples, and a clear note where nothing can be read."""

from ladder.core import conditions


def test_a_line_of_nvidia_smi_is_parsed_and_its_reasons_named():
    found = conditions.parse("1980, 3201, 0x0000000000000004, 45, 312.55")
    assert found == {
        "sm_mhz": 1980.0,
        "mem_mhz": 3201.0,
        "reasons": 0x4,
        "temperature_c": 45.0,
        "power_w": 312.55,
    }
    assert conditions.reasons(0x1 | 0x4 | 0x40 | 0x10000) == [
        "gpu_idle",
        "sw_power_cap",
        "hw_thermal_slowdown",
        "0x10000",
    ]
    assert conditions.parse("not, a, line") is None
    assert conditions.parse("[N/A], 3201, 0x0, [N/A], [N/A]")["sm_mhz"] is None


def test_the_summary_spreads_each_figure_and_leaves_idle_out():
    lines = ["1980, 3201, 0x1, 40, 100", "1755, 3201, 0x4, 50, 690", "1980, 3201, 0x0, 45, 400"]
    found = conditions.summary([conditions.parse(line) for line in lines])
    assert found["samples"] == 3
    assert found["sm_mhz"] == {"min": 1755.0, "median": 1980.0, "max": 1980.0}
    assert found["throttle_reasons"] == ["sw_power_cap"]  # idle between kernels is no throttle


def test_without_nvidia_smi_the_sampler_says_so(monkeypatch):
    monkeypatch.setattr(conditions.shutil, "which", lambda name: None)
    with conditions.Sampler(interval_s=0.01) as sampler:
        pass
    found = sampler.summary()
    assert found["samples"] == 0 and found["sm_mhz"] is None
    assert found["note"] == "nvidia-smi not found: no clocks or throttle reasons recorded"
