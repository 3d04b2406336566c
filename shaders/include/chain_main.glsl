// main() of a command list's fused chain (LAYOUT_CHAIN; dmlgpu/compiled.py builds its program).
// Push constants: CHAIN_PROGRAM = the program's word offset in binding 1, CHAIN_STEPS = its
// step count (fields named in abi.glsl), count = the bytes of every step's tensors (a multiple
// of 16). Step s is a uvec4 (op code, a, b, output): word offsets into the arena. The command list fuses only steps whose
// tensors are all packed, of one size, and either the same bytes or disjoint, so unit u of
// every step touches bytes [16u, 16u + 16) of its tensors and each invocation can run the whole
// program on its units in recorded order: a step that depends on an earlier one reads what the
// same invocation wrote. The value just written stays in a register for a next step that reads it.
void main() {
    uint first = CHAIN_PROGRAM / 4u, steps = CHAIN_STEPS;
    FOR_EACH_UNIT(u, p.count / 16u) {
        uint last = 0xFFFFFFFFu;  // word offset of the tensor `r` was last stored to
        uvec4 r = uvec4(0u);
        for (uint s = 0u; s < steps; ++s) {
            uvec4 step = chain_steps[first + s];
            uvec4 a = step.y == last ? r : arena_v[step.y / 4u + u];
            uvec4 b = step.z == last ? r : arena_v[step.z / 4u + u];
            r = CHAIN_APPLY(step.x, a, b);
            arena_v[step.w / 4u + u] = r;
            last = step.w;
        }
    }
}
