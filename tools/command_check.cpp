// solder check FILE — parse and verify a program; one line per definition.
#include <iostream>
#include <sstream>

#include "cli.h"
#include "commands.h"
#include "ir/printer.h"
#include "support/json.h"

namespace solder::cli {

int command_check(const std::vector<std::string>& args) {
  ProgramOptions options;
  Command command{"check", "solder check FILE [--small] [--dim NAME=VALUE]... [--json]",
                  "Parse and verify a program at the chosen sizes, then print one line per definition:\n"
                  "its target, dtype, p-dims, r-dims and reduction. Exit 0 when the program is valid,\n"
                  "2 with a file:line:column message when it is not."};
  add_program_options(command, options, false);
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  BoundProgram program = load_program(files[0], options.sizes);

  auto dims_text = [](const Definition& def, const std::vector<IndexVarDecl>& vars, const BoundDefinition& bd,
                      const BoundProgram& p) {
    std::string text;
    for (auto& v : vars) {
      if (!text.empty()) text += ", ";
      text += v.name + "=" + std::to_string(bd.extent.at(v.name));
    }
    (void)def;
    (void)p;
    return "(" + text + ")";
  };

  if (options.json) {
    JsonWriter json;
    json.begin_object().key("program").value(program.program->name).key("file").value(files[0]);
    json.key("dims").begin_object();
    for (auto& [name, value] : program.dims) json.key(name).value(value);
    json.end_object().key("definitions").begin_array();
    for (auto& bd : program.defs) {
      const Definition& def = *bd.def;
      json.begin_object().key("target").value(def.target.name);
      json.key("dtype").value(dtype_name(def.value_dtype()));
      json.key("output").value(def.target.is_output);
      json.key("reduction").value(reduce_op_name(def.reduce));
      json.key("p_dims").begin_object();
      for (auto& v : def.target.index) json.key(v.name).value(bd.extent.at(v.name));
      json.end_object().key("r_dims").begin_object();
      for (auto& v : def.reduce_vars) json.key(v.name).value(bd.extent.at(v.name));
      json.end_object().end_object();
    }
    json.end_array().key("valid").value(true).end_object();
    std::cout << json.str() << "\n";
    return kExitOk;
  }

  std::ostringstream out;
  out << "program " << program.program->name << " (" << files[0] << ")\n  dims:";
  for (auto& d : program.program->dims) out << " " << d.name << "=" << program.dims.at(d.name);
  out << "\n";
  for (auto& bd : program.defs) {
    const Definition& def = *bd.def;
    std::string head = std::string(def.target.is_output ? "out " : "") + def.target.name;
    if (def.index_target) head += ", " + def.index_target->name;
    out << "  " << head << " : " << dtype_name(def.value_dtype()) << "  p=" << dims_text(def, def.target.index, bd, program)
        << "  r=" << dims_text(def, def.reduce_vars, bd, program) << "  " << reduce_op_name(def.reduce);
    if (def.reduce == ReduceOp::topk) out << "(k=" << bd.topk_k << ")";
    out << "\n";
  }
  out << "ok: " << program.defs.size() << " definition(s), " << program.outputs().size() << " output(s)\n";
  std::cout << out.str();
  return kExitOk;
}

}  // namespace solder::cli
