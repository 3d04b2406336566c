import sys, time, numpy as np
import dmlgpu
from dmlgpu.runtime import Program, shader_compiler
rdev = dmlgpu.default_device()
HEAD = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { vec4 x[]; };
layout(std430, binding = 1) buffer Out { vec4 o[]; };
layout(push_constant) uniform P { uint n4, in_at, out_at; } p;
shared dvec4 t[64];
dvec4 gs, gm;
"""
LOOP = """
    uint lanes = gl_NumWorkGroups.x * 64u, per = p.n4 / gl_NumWorkGroups.x;
    uint i = gl_WorkGroupID.x * per + gl_LocalInvocationID.x, end = gl_WorkGroupID.x * per + per;
    precise dvec4 s = dvec4(0.0lf), m = dvec4(0.0lf);
    for (; i < end; i += 64u) { dvec4 d = dvec4(x[p.in_at + i]); s += d; m += abs(s); }
"""
V = {
 "plain": "void main() {" + LOOP + "o[p.out_at + gl_GlobalInvocationID.x] = vec4(s + m); }",
 "live_across": "void main() {" + LOOP + "barrier(); o[p.out_at + gl_GlobalInvocationID.x] = vec4(s + m); }",
 "global_across": "void f() {" + LOOP + "gs = s; gm = m; }\nvoid main() { f(); barrier(); o[p.out_at + gl_GlobalInvocationID.x] = vec4(gs + gm); }",
 "global_before": "void f() {" + LOOP + "gs = s; gm = m; }\nvoid main() { f(); t[gl_LocalInvocationID.x] = gs + gm; barrier(); o[p.out_at + gl_GlobalInvocationID.x] = vec4(t[gl_LocalInvocationID.x ^ 1u]); }",
}
n = 64 << 20
host = np.random.default_rng(1).standard_normal(n // 4).astype(np.float32)
src = rdev.upload(host)
ls = {}; keep = []
for name, code in V.items():
    prog = Program(name, shader_compiler.spirv(HEAD + code), np.zeros(0, np.uint32), 3)
    out = rdev.allocate(64 * 64 * 16); keep.append(out)
    ls[name] = rdev.launch(prog, (64, 1, 1), [src, out], np.array([n // 16, src.arena_offset // 16, out.arena_offset // 16], np.uint32),
                        reads=[(src, 0, n)], writes=[(out, 0, out.size_in_bytes)], name=name)
    rdev.time_dispatches(ls[name], 1)
for r in range(3):
    for name, l in ls.items():
        t = float(np.median(rdev.time_dispatches(l, 7)))
        print(f"{r} {name:14s} {t*1e3:.2f} ms", flush=True)
