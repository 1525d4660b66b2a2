"""Plan variants on the command line: `--plan KEY=VALUE ...` -> overrides of faces.engines.base.Plan."""

import dataclasses


def parse_plan(items: list[str]) -> dict:
    """KEY=VALUE items -> Plan overrides: numbers, `turns=1,3` (`turns=` for none; `tilted_looks=30,-30`),
    `turned_scale=1.0` (`none` where a field may be None), `edge_second_look=1`."""
    from faces.engines.base import Plan

    defaults = Plan()
    fields = {field.name: field for field in dataclasses.fields(Plan)}
    overrides = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in fields:
            raise SystemExit(f"--plan: Plan has no field {key!r}")
        default = getattr(defaults, key)
        if value.lower() == "none" and "None" in str(fields[key].type):
            overrides[key] = None
        elif isinstance(default, tuple):
            kind = type(default[0]) if default else int
            overrides[key] = tuple(kind(part) for part in value.split(",") if part)
        elif isinstance(default, bool):
            overrides[key] = value.lower() in {"1", "true", "yes"}
        elif default is None:
            overrides[key] = None if value == "" else float(value)
        else:
            overrides[key] = type(default)(float(value))
    return overrides
