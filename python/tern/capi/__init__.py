"""onnxruntime's `capi` as ported code names it: `ort.capi.onnxruntime_pybind11_state.InvalidArgument` and its
siblings, which tern's own exceptions derive from (tern/_capi.py), so `import tern as ort` keeps existing
`except` clauses working."""
