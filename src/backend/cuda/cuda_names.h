// Names in the generated CUDA: one scheme for every name the Kernel IR carries into C++ (globals,
// kernels, buffers, grid, loop and axis variables) and every name the code generator introduces.
//
//   * The generator's own locals end in one underscore (`first_`, `vec_`, `acc0_`, `point_`), or are
//     the few fixed words of reserved_cuda_words() (`smem`, `block_linear`, `reduce_scratch`); the
//     locals it derives from a Kernel IR name add a fixed suffix (`x_tile_stage0`, `q_stages`).
//   * A Kernel IR name is emitted as written when it is plain: letters and digits in words joined by
//     single underscores (`q`, `x_tile`, `acc_y`, `T_t`), not a reserved word (C++ keywords, CUDA
//     builtins, macros and functions the generated code or its headers define, the generator's fixed
//     words) and not of a reserved shape (ending in `_stage<N>` or `_stages`, or a numbered local
//     of the generator: `row_value<N>`). Generated code reads like the program.
//   * Any other name is mangled: a plain-shaped reserved word gets two underscores (`int` → `int__`,
//     `threadIdx` → `threadIdx__`), and a name that is not plain-shaped (leading, trailing or double
//     underscores: `__global__`, `first_`) becomes `u_` + name + `__` (`u___global____`, `u_first___`).
//
// Plain names never end in an underscore or contain two in a row; mangled names end in two; the
// generator's locals end in exactly one or are reserved words; derived locals end in a fixed suffix
// that no plain name has. So no two of them can be equal, and no mangled name starts with an
// underscore (the compiler's and the C library's space). The mapping is one-to-one.
#pragma once

#include <set>
#include <string>

#include "kernel/kernel_ir.h"

namespace solder {

// The C++ spelling of a Kernel IR name (see above).
std::string cuda_name(const std::string& name);

// Words a Kernel IR name must not be emitted as (keywords, CUDA and C library names, macros, the
// generator's fixed locals).
const std::set<std::string>& reserved_cuda_words();

// A reserved word, or a name of a shape the generator numbers or derives (`row_value<N>`,
// `<name>_stage<N>`, `<name>_stages`): a Kernel IR name of this kind is mangled.
bool reserved_cuda_name(const std::string& name);

// The program with every name the CUDA source declares or reads replaced by its cuda_name; kernel
// names also differ from every global's (a kernel function and its parameter may not share a name).
// Comments and each kernel's list of definitions keep the program's spelling.
KernelProgram with_cuda_names(const KernelProgram& program);

// Tests only: while on, cuda_name(x) is "QQ" + x + "QQ", so that every identifier of the generated
// source without QQ is the generator's or the library's (CudaNames.GeneratorLocalsAreReserved).
void mark_cuda_names_for_testing(bool on);

}  // namespace solder
