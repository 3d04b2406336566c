// dmlgpu.runtime._glsl: GLSL compute shaders to SPIR-V in-process, with glslang's library linked in
// statically (so the wheel still needs only libvulkan.so.1 at run time). The fused graphs'
// generated code (dmlgpu/graph_source.py) is compiled here; dmlgpu.runtime.shader_compiler
// keeps the results in memory and on disk.
#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>
#include <glslang/build_info.h>
#include <pybind11/pybind11.h>

#include "unlocked.h"

#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// glslang's process state and symbol tables are shared: one compile at a time. Never destroyed
// (nor released at exit, below).
std::mutex* compiler_lock = new std::mutex();
bool initialized = false;

// At exit, once the interpreter is gone, the exit handlers destroy glslang's static tables (its
// keyword map and reserved words are static objects in glslang 15, the wheel's), while a daemon thread may
// still be compiling: it would read them freed (SIGSEGV at exit). This handler, registered when the
// module is imported (after those tables were made, so it runs before they are destroyed), waits
// for a compile in flight and keeps the lock: no compile starts after it.
void hold_compiler_at_exit() { compiler_lock->lock(); }

// A forked child has none of its parent's threads, and the lock may be held by one of them: the
// child starts from a free lock (the held one is left behind, never touched), so its exit does not wait.
void forget_lock_in_child() { compiler_lock = new std::mutex(); }

// Compiles `source` (a Vulkan 1.1 compute shader); the log on failure.
bool compile(const std::string& source, std::vector<unsigned>* spirv, std::string* log) {
    std::lock_guard<std::mutex> hold(*compiler_lock);
    if (!initialized) {
        glslang::InitializeProcess();
        initialized = true;
    }
    const char* text = source.c_str();
    glslang::TShader shader(EShLangCompute);
    shader.setStrings(&text, 1);
    shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
    shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_1);
    shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_3);
    if (!shader.parse(GetDefaultResources(), 450, false, EShMsgDefault)) {
        *log = shader.getInfoLog();
        return false;
    }
    glslang::TProgram program;
    program.addShader(&shader);
    if (!program.link(EShMsgDefault)) {
        *log = program.getInfoLog();
        return false;
    }
    glslang::SpvOptions options;
    options.disableOptimizer = true;  // the driver optimises; the generated code has nothing dead
    glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), *spirv, &options);
    return true;
}

}  // namespace

PYBIND11_MODULE(_glsl, m) {
    m.doc() = "GLSL compute shaders to SPIR-V (glslang, linked in)";
    static bool registered = false;
    if (!registered) {
        registered = true;
        pthread_atfork(nullptr, nullptr, forget_lock_in_child);
        std::atexit(hold_compiler_at_exit);
    }
    m.def("compile", [](const std::string& source) {
        std::vector<unsigned> spirv;
        std::string log;
        dmlgpu::Unlocked unlocked;
        bool ok = compile(source, &spirv, &log);
        unlocked.relock();
        if (!ok) throw std::invalid_argument("glslang: " + log);
        return py::bytes(reinterpret_cast<const char*>(spirv.data()), spirv.size() * sizeof(unsigned));
    }, py::arg("source"), "SPIR-V of a GLSL compute shader (ValueError with glslang's log if it does not compile)");
    m.attr("GLSLANG_VERSION") = std::to_string(GLSLANG_VERSION_MAJOR) + "." + std::to_string(GLSLANG_VERSION_MINOR) +
                                "." + std::to_string(GLSLANG_VERSION_PATCH) + GLSLANG_VERSION_FLAVOR;
}
