import sys, time, numpy as np
import dmlgpu
from dmlgpu.runtime import Program, shader_compiler
rdev = dmlgpu.default_device()
H = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { vec4 x[]; };
layout(std430, binding = 0) readonly buffer InU { uvec4 xu[]; };
layout(std430, binding = 1) buffer Out { vec4 o[]; };
layout(push_constant) uniform P { uint n4, in_at, out_at; } p;
"""
V = {
"runs": """void main() {
    uint lanes = gl_NumWorkGroups.x * 64u, per = p.n4 / lanes;
    uint i = gl_GlobalInvocationID.x * per, end = i + per;
    precise dvec4 s = dvec4(0.0lf), m = dvec4(0.0lf);
    for (; i < end; ++i) { dvec4 d = dvec4(x[p.in_at + i]); s += d; m += abs(s); }
    o[p.out_at + gl_GlobalInvocationID.x] = vec4(s + m); }""",
"runs_u": """void main() {
    uint lanes = gl_NumWorkGroups.x * 64u, per = p.n4 / lanes;
    uint i = gl_GlobalInvocationID.x * per, end = i + per;
    precise dvec4 s = dvec4(0.0lf), m = dvec4(0.0lf);
    for (; i < end; ++i) { dvec4 d = dvec4(uintBitsToFloat(xu[p.in_at + i])); s += d; m += abs(s); }
    o[p.out_at + gl_GlobalInvocationID.x] = vec4(s + m); }""",
"runs_chunk": """void main() {
    uint lanes = 64u, per = p.n4 / gl_NumWorkGroups.x / lanes;
    uint at = p.in_at + gl_WorkGroupID.x * (p.n4 / gl_NumWorkGroups.x);
    precise dvec4 s = dvec4(0.0lf), m = dvec4(0.0lf);
    for (uint v = at + gl_LocalInvocationID.x * per, last = v + per; v < last; ++v) { dvec4 d = dvec4(uintBitsToFloat(xu[v])); s += d; m += abs(s); }
    o[p.out_at + gl_GlobalInvocationID.x] = vec4(s + m); }""",
"runs_chunk_ok": """void main() {
    uint lanes = 64u, per = p.n4 / gl_NumWorkGroups.x / lanes;
    bool ok = (p.in_at % 4u) == 0u && gl_WorkGroupID.x < 100000u;
    uint at = p.in_at + gl_WorkGroupID.x * (p.n4 / gl_NumWorkGroups.x);
    per = ok ? per : 0u;
    precise dvec4 s = dvec4(0.0lf), m = dvec4(0.0lf);
    for (uint v = at + gl_LocalInvocationID.x * per, last = v + per; v < last; ++v) { dvec4 d = dvec4(uintBitsToFloat(xu[v])); s += d; m += abs(s); }
    o[p.out_at + gl_GlobalInvocationID.x] = vec4(s + m); }""",
}
n = 64 << 20
host = np.random.default_rng(1).standard_normal(n // 4).astype(np.float32)
src = rdev.upload(host)
ls = {}; keep = []
for name, code in V.items():
    prog = Program(name, shader_compiler.spirv(H + code), np.zeros(0, np.uint32), 3)
    out = rdev.allocate(64 * 64 * 16); keep.append(out)
    ls[name] = rdev.launch(prog, (64, 1, 1), [src, out], np.array([n // 16, src.arena_offset // 16, out.arena_offset // 16], np.uint32),
                        reads=[(src, 0, n)], writes=[(out, 0, out.size_in_bytes)], name=name)
    rdev.time_dispatches(ls[name], 1)
res = {k: [] for k in ls}
for r in range(5):
    for k, l in ls.items():
        res[k].append(float(np.median(rdev.time_dispatches(l, 5))))
for k, v in res.items():
    print(f"{k:14s} min {min(v)*1e3:.2f} med {np.median(v)*1e3:.2f}")
