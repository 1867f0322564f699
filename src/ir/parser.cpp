#include "ir/parser.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/expr_depth.h"
#include "ir/lexer.h"
#include "ir/limits.h"
#include "ir/printer.h"

namespace solder {
namespace {

const std::set<std::string, std::less<>> kKeywords = {
    "program", "dim", "small", "in", "out", "inf", "cast", "f32", "f16", "bf16", "f8e4m3", "f8e5m2",
    "i32", "bool"};

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& file) : tokens_(std::move(tokens)), file_(file) {}

  Program parse() {
    program_.file = file_;
    skip_newlines();
    expect_name("program", "a 'program NAME' line first");
    program_.name = expect_identifier("a program name");
    end_statement();
    while (peek().kind != TokenKind::end) {
      depth_.clear();
      if (peek().is("dim")) parse_dims(program_.dims, false);
      else if (peek().is("small")) parse_dims(program_.small, true);
      else if (peek().is("in")) parse_input();
      else if (peek().is("program")) error(peek(), "expected one 'program' line per file, found a second one");
      else parse_definition();
    }
    return std::move(program_);
  }

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::string file_;
  Program program_;
  // Index variables of the definition being parsed (p-variables, then r-variables, then those of
  // the reductions inside the body that enclose the current position).
  std::vector<std::string> index_vars_;
  // Depth of every expression node built for the current statement (leaves: 1), and how deep the
  // recursive descent currently is; both stay within kMaxExprDepth (limits.h).
  std::unordered_map<const ExprNode*, int> depth_;
  int nesting_ = 0;
  // The declaration of each index variable of the current definition (for a temporary's extents).
  std::map<std::string, IndexVarDecl> index_decls_;
  // Whether a definition's body is being parsed (where reductions may appear inside expressions).
  bool in_body_ = false;
  int temporaries_ = 0;

  // ---- Token helpers ----
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { const Token& t = peek(); if (pos_ < tokens_.size() - 1) ++pos_; return t; }
  [[noreturn]] void error(const Token& at, const std::string& message) { fail(file_, at.loc, message); }
  [[noreturn]] void expected(const std::string& what) { error(peek(), "expected " + what + ", found " + peek().describe()); }
  void skip_newlines() { while (peek().kind == TokenKind::newline) next(); }
  bool accept(std::string_view symbol) {
    if (peek().kind == TokenKind::symbol && peek().text == symbol) { next(); return true; }
    return false;
  }
  void expect(std::string_view symbol, const std::string& context = "") {
    if (!accept(symbol)) expected("'" + std::string(symbol) + "'" + context);
  }
  void expect_name(std::string_view name, const std::string& what) {
    if (!(peek().kind == TokenKind::name && peek().text == name)) expected(what);
    next();
  }
  std::string expect_identifier(const std::string& what) {
    if (peek().kind != TokenKind::name) expected(what);
    if (kKeywords.count(peek().text)) error(peek(), "expected " + what + ", found the keyword '" + peek().text + "'");
    return next().text;
  }
  void end_statement() {
    if (peek().kind == TokenKind::end) return;
    if (peek().kind != TokenKind::newline) expected("end of line");
    skip_newlines();
  }

  // ---- Name classification ----
  // Indexed by name, so that a program of many statements parses in linear time.
  std::unordered_set<std::string> dim_names_;
  std::unordered_map<std::string, size_t> tensor_ranks_;  // inputs and targets
  bool is_dim(const std::string& n) const { return dim_names_.count(n) > 0; }
  bool is_tensor(const std::string& n) const { return tensor_ranks_.count(n) > 0; }
  size_t tensor_rank(const std::string& n) const { return tensor_ranks_.at(n); }
  void check_new_name(const Token& at, const std::string& name, const std::string& role) {
    // '$' names are the temporaries of reductions inside expressions; 'solder print' writes their
    // definitions, so a definition may have one, nothing else may.
    if (name[0] == '$' && role != "definition")
      error(at, "expected " + role + " name, found '" + name + "'; names starting with '$' are reserved for the "
                "temporaries of reductions inside expressions");
    if (is_dim(name)) error(at, role + " '" + name + "' has the name of a dim; names must be unique");
    if (is_tensor(name)) error(at, role + " '" + name + "' has the name of a tensor; names must be unique");
  }

  // ---- Statements ----
  void parse_dims(std::vector<DimDecl>& into, bool small) {
    next();  // 'dim' / 'small'
    do {
      const Token& at = peek();
      std::string name = expect_identifier("a dim name");
      if (!small) {
        check_new_name(at, name, "dim");
      } else {
        if (!is_dim(name)) error(at, "'small' names '" + name + "', which is not a declared dim");
        for (auto& d : into)
          if (d.name == name) error(at, "'small' gives dim '" + name + "' a second value");
      }
      expect("=", " after the dim name");
      Expr value = parse_dim_expr();
      into.push_back({name, value, at.loc});
      if (!small) dim_names_.insert(name);
    } while (accept(","));
    end_statement();
  }

  void parse_input() {
    next();  // 'in'
    const Token& at = peek();
    InputDecl in;
    in.name = expect_identifier("an input name");
    in.loc = at.loc;
    check_new_name(at, in.name, "input");
    if (accept("[")) {
      do in.shape.push_back(parse_dim_expr());
      while (accept(","));
      expect("]", " to close the shape");
    }
    expect(":", " and a dtype after the input's shape");
    in.dtype = parse_dtype_token();
    if (accept("~")) {
      const Token& dist_at = peek();
      std::string dist = expect_identifier("a distribution name");
      using K = InputDistribution::Kind;
      std::optional<K> kind;
      for (K k : {K::normal, K::uniform, K::randint, K::sorted_randint, K::bernoulli})
        if (distribution_name(k) == dist) kind = k;
      if (!kind) error(dist_at, "expected a distribution (normal, uniform, randint, sorted_randint, bernoulli), found '" + dist + "'");
      in.distribution.kind = *kind;
      expect("(", " after the distribution name");
      if (!peek().is(")")) {
        do in.distribution.params.push_back(parse_signed_number());
        while (accept(","));
      }
      expect(")", " to close the distribution's parameters");
      int arity = distribution_arity(*kind);
      if (static_cast<int>(in.distribution.params.size()) != arity)
        error(dist_at, "distribution '" + dist + "' takes " + std::to_string(arity) + " parameter(s), found " +
                           std::to_string(in.distribution.params.size()));
    }
    tensor_ranks_[in.name] = in.shape.size();
    program_.inputs.push_back(std::move(in));
    end_statement();
  }

  double parse_signed_number() {
    bool negative = accept("-");
    if (peek().kind != TokenKind::integer && peek().kind != TokenKind::real) expected("a number");
    double v = next().number;
    return negative ? -v : v;
  }

  DType parse_dtype_token() {
    const Token& at = peek();
    if (at.kind != TokenKind::name) expected("a dtype (f32, f16, bf16, f8e4m3, f8e5m2, i32, bool)");
    auto d = parse_dtype(at.text);
    if (!d) error(at, "expected a dtype (f32, f16, bf16, f8e4m3, f8e5m2, i32, bool), found '" + at.text + "'");
    next();
    return *d;
  }

  DefTarget parse_target() {
    DefTarget t;
    if (peek().is("out")) { next(); t.is_output = true; }
    const Token& at = peek();
    t.name = expect_identifier("a tensor name to define");
    t.loc = at.loc;
    check_new_name(at, t.name, "definition");
    if (peek().is("=") || peek().is(":")) {
      error(peek(), "expected '[' and the index variables of '" + t.name + "' (write '" + t.name + "[]' for a scalar), found " + peek().describe());
    }
    expect("[", " and the index variables of '" + t.name + "'");
    if (!peek().is("]")) {
      do t.index.push_back(parse_index_decl("an index variable"));
      while (accept(","));
    }
    expect("]", " to close the index list");
    if (accept(":")) t.dtype = parse_dtype_token();
    return t;
  }

  IndexVarDecl parse_index_decl(const std::string& what) {
    const Token& at = peek();
    if (at.kind == TokenKind::integer || at.kind == TokenKind::real)
      error(at, "expected " + what + " (a name), found " + at.describe() + "; a definition's indices are variables");
    IndexVarDecl v;
    v.name = expect_identifier(what);
    v.loc = at.loc;
    check_new_name(at, v.name, "index variable");
    if (std::find(index_vars_.begin(), index_vars_.end(), v.name) != index_vars_.end())
      error(at, "index variable '" + v.name + "' appears twice in this definition");
    index_vars_.push_back(v.name);
    if (accept(":")) v.extent = parse_dim_expr();
    index_decls_[v.name] = v;
    return v;
  }

  void parse_definition() {
    index_vars_.clear();
    index_decls_.clear();
    Definition def;
    def.loc = peek().loc;
    def.target = parse_target();
    if (accept(",")) {
      const Token& second = peek();
      std::vector<std::string> first_vars = index_vars_;
      index_vars_.clear();  // the second target re-declares the same variables
      DefTarget t = parse_target();
      index_vars_ = first_vars;
      if (t.name == def.target.name) error(second, "the two targets of a definition must have different names");
      def.index_target = std::move(t);
      // Both targets share the index variables; the second list re-declares them.
      auto& a = def.target.index;
      auto& b = def.index_target->index;
      bool same = a.size() == b.size();
      for (size_t i = 0; same && i < a.size(); ++i) same = a[i].name == b[i].name;
      if (!same) error(second, "the second target must use the same index variables as the first, in the same order");
    }
    expect("=", " after the target");
    std::vector<std::string> p_vars = index_vars_;
    parse_reduction_header(def, p_vars);
    if (def.index_target && def.reduce != ReduceOp::topk)
      error(peek(), "two targets are only allowed for topk (values and indices)");
    if (peek().kind == TokenKind::newline || peek().kind == TokenKind::end) expected("an expression");
    in_body_ = true;
    def.body = parse_expr();
    in_body_ = false;
    end_statement();
    tensor_ranks_[def.target.name] = def.target.index.size();
    if (def.index_target) tensor_ranks_[def.index_target->name] = def.target.index.size();
    program_.defs.push_back(std::move(def));
  }

  // Recognises `R(vars)` at the start of a definition's right-hand side (see docs/language.md,
  // "How a reduction is recognised"); leaves the position unchanged when it is not one.
  void parse_reduction_header(Definition& def, const std::vector<std::string>& p_vars) {
    if (peek().kind != TokenKind::name || !peek(1).is("(")) return;
    auto op = parse_reduce_op(peek().text);
    if (!op) return;
    const Token& op_token = peek();
    if ((*op == ReduceOp::max || *op == ReduceOp::min) && !fresh_arguments(pos_ + 2, p_vars)) return;
    next();
    next();  // op '('
    def.reduce = *op;
    if (*op == ReduceOp::topk) {
      def.topk_k = parse_dim_expr();
      expect(",", " between topk's k and its reduction variable");
    }
    do {
      const Token& at = peek();
      if (at.kind == TokenKind::name && std::find(p_vars.begin(), p_vars.end(), at.text) != p_vars.end())
        error(at, "reduction variable '" + at.text + "' is also an index of the target; reduce over a new variable");
      def.reduce_vars.push_back(parse_index_decl("a reduction variable"));
    } while (accept(","));
    expect(")", " to close the reduction's variables");
    bool single = *op == ReduceOp::argmax || *op == ReduceOp::argmin || *op == ReduceOp::topk;
    if (single && def.reduce_vars.size() != 1)
      error(op_token, std::string(reduce_op_name(*op)) + " reduces over exactly one variable, found " +
                          std::to_string(def.reduce_vars.size()));
  }

  // Whether the call arguments starting at token k are all fresh names (not a keyword, dim, tensor
  // or one of `taken`), each optionally with an explicit extent: then max(...) / min(...) is a
  // reduction rather than the binary function.
  bool fresh_arguments(size_t k, const std::vector<std::string>& taken) const {
    while (true) {
      const Token& t = tokens_[k];
      if (t.kind != TokenKind::name || kKeywords.count(t.text) || is_dim(t.text) || is_tensor(t.text) ||
          std::find(taken.begin(), taken.end(), t.text) != taken.end())
        return false;
      ++k;
      if (tokens_[k].is(":")) {  // skip an extent up to ',' or ')' at depth 0
        int depth = 0;
        ++k;
        while (tokens_[k].kind != TokenKind::end && !(depth == 0 && (tokens_[k].is(",") || tokens_[k].is(")")))) {
          if (tokens_[k].is("(")) ++depth;
          if (tokens_[k].is(")")) --depth;
          ++k;
        }
      }
      if (tokens_[k].is(",")) { ++k; continue; }
      return tokens_[k].is(")");
    }
  }

  // A reduction inside an expression, `R(vars) body`, where the body is the chain of factors joined
  // by * / // % that follows (it binds like a product). It becomes a definition of its own, a
  // temporary named '$' + R + a number, over the enclosing variables its body uses; the expression
  // loads the temporary. See docs/language.md, "Reductions inside expressions".
  Expr parse_inner_reduction(ReduceOp op) {
    const Token& op_token = peek();
    if (op == ReduceOp::topk)
      error(op_token, "topk may only start the right-hand side of a definition (it defines values and indices)");
    std::vector<std::string> outer = index_vars_;
    next();
    next();  // op '('
    Definition temp;
    temp.loc = op_token.loc;
    temp.reduce = op;
    do temp.reduce_vars.push_back(parse_index_decl("a reduction variable"));
    while (accept(","));
    expect(")", " to close the reduction's variables");
    if ((op == ReduceOp::argmax || op == ReduceOp::argmin) && temp.reduce_vars.size() != 1)
      error(op_token, std::string(reduce_op_name(op)) + " reduces over exactly one variable, found " +
                          std::to_string(temp.reduce_vars.size()));
    if (peek().kind == TokenKind::newline || peek().kind == TokenKind::end || peek().is(")") || peek().is(","))
      expected("the expression that " + std::string(reduce_op_name(op)) + " reduces");
    temp.body = parse_binary_level(5);
    index_vars_ = outer;  // the reduction's variables end with its body
    // The temporary's index variables: the enclosing ones its body uses, in declaration order.
    std::vector<std::string> used = vars_used(temp.body);
    std::vector<Expr> index;
    for (const std::string& v : outer) {
      if (std::find(used.begin(), used.end(), v) == used.end()) continue;
      IndexVarDecl d = index_decls_.at(v);
      temp.target.index.push_back(d);
      index.push_back(make_var(v, op_token.loc));
    }
    std::string name;
    do name = "$" + std::string(reduce_op_name(op)) + std::to_string(++temporaries_);
    while (is_tensor(name) || is_dim(name));
    temp.target.name = name;
    temp.target.loc = op_token.loc;
    program_.defs.push_back(std::move(temp));
    return make_load(name, std::move(index), op_token.loc);
  }

  // ---- Expressions ----
  Expr parse_dim_expr() {
    const Token& start = peek();
    bool in_body = in_body_;
    in_body_ = false;
    Expr e = parse_expr();
    in_body_ = in_body;
    check_dim_expr(e, start);
    return e;
  }

  // A dim expression may use integer literals, earlier dims and + - * // % only.
  void check_dim_expr(const Expr& e, const Token& start) {
    std::string problem;
    SourceLoc where = start.loc;
    std::function<void(const Expr&)> walk = [&](const Expr& x) {
      if (!problem.empty()) return;
      if (auto c = x.as<ConstNode>()) {
        if (!c->is_integer) { problem = "a real number"; where = x.loc(); }
        return;
      }
      if (x.as<DimRefNode>()) return;
      if (auto v = x.as<VarNode>()) { problem = "'" + v->name + "', which is not a declared dim"; where = x.loc(); return; }
      if (auto b = x.as<BinaryNode>()) {
        if (b->op == BinaryOp::add || b->op == BinaryOp::sub || b->op == BinaryOp::mul ||
            b->op == BinaryOp::floordiv || b->op == BinaryOp::mod) {
          walk(b->lhs);
          walk(b->rhs);
          return;
        }
      }
      if (auto u = x.as<UnaryNode>(); u && u->op == UnaryOp::neg) { walk(u->operand); return; }
      problem = "'" + print_expr(x) + "'";
      where = x.loc();
    };
    walk(e);
    if (!problem.empty())
      fail(file_, where.known() ? where : start.loc,
           "expected a size (integer literals, dims, + - * // %), found " + problem);
  }

  Expr parse_expr() { return parse_or(); }

  // Records the depth of a node built from already-tracked children; refuses one deeper than
  // kMaxExprDepth. Every node the parser builds goes through here.
  Expr track(Expr e, const Token& at) {
    int depth = 0;
    for (auto& child : children(e)) {
      auto it = depth_.find(child.get());
      depth = std::max(depth, it == depth_.end() ? 1 : it->second);
    }
    ++depth;
    if (depth > kMaxExprDepth) too_deep(at);
    depth_[e.get()] = depth;
    return e;
  }
  [[noreturn]] void too_deep(const Token& at) {
    error(at, "expression nests more than " + std::to_string(kMaxExprDepth) +
                  " levels deep (parentheses, calls, operators); split it into several definitions");
  }
  // Counts one level of recursive descent (a parenthesis, call or unary operator).
  struct NestingGuard {
    Parser& parser;
    NestingGuard(Parser& p, const Token& at) : parser(p) {
      if (++parser.nesting_ > kMaxExprDepth) parser.too_deep(at);
    }
    ~NestingGuard() { --parser.nesting_; }
  };

  static bool is_associative(BinaryOp op) {
    return op == BinaryOp::add || op == BinaryOp::mul || op == BinaryOp::logical_and || op == BinaryOp::logical_or;
  }

  // operands[lo..hi) joined by ops[lo+1..hi) (all the same associative operator) as a balanced tree.
  Expr balanced(const std::vector<Expr>& operands, const std::vector<BinaryOp>& ops,
                const std::vector<const Token*>& tokens, size_t lo, size_t hi) {
    if (hi - lo == 1) return operands[lo];
    size_t mid = lo + (hi - lo) / 2;
    Expr l = balanced(operands, ops, tokens, lo, mid), r = balanced(operands, ops, tokens, mid, hi);
    return track(make_binary(ops[mid], l, r, tokens[mid]->loc), *tokens[mid]);
  }

  // A chain `x0 op1 x1 op2 x2 ...` of one precedence level associates to the left, except that a
  // run of more than kBalancedRunLength operands joined by the same associative operator (+ * && ||)
  // becomes one balanced subtree, so that long flat sums stay shallow (docs/language.md, "Limits").
  Expr fold_chain(const std::vector<Expr>& operands, const std::vector<BinaryOp>& ops,
                  const std::vector<const Token*>& tokens) {
    Expr acc = operands[0];
    size_t i = 1;
    while (i < operands.size()) {
      size_t end = i;
      while (end < operands.size() && ops[end] == ops[i]) ++end;
      // The run starting at the chain's first operand includes it.
      size_t first = i == 1 ? 0 : i;
      if (is_associative(ops[i]) && end - first > static_cast<size_t>(kBalancedRunLength)) {
        Expr run = balanced(operands, ops, tokens, first, end);
        acc = first == 0 ? run : track(make_binary(ops[i], acc, run, tokens[i]->loc), *tokens[i]);
      } else {
        for (size_t k = i; k < end; ++k) acc = track(make_binary(ops[k], acc, operands[k], tokens[k]->loc), *tokens[k]);
      }
      i = end;
    }
    return acc;
  }

  Expr parse_binary_level(int level) {
    // level 1: ||, 2: &&, 3: comparisons (non-associative), 4: + -, 5: * / // %
    if (level > 5) return parse_unary();
    std::vector<Expr> operands{parse_binary_level(level + 1)};
    std::vector<BinaryOp> ops{BinaryOp::add};  // ops[k] joins operands[k-1] and operands[k]
    std::vector<const Token*> tokens{nullptr};
    while (true) {
      const Token& t = peek();
      if (t.kind != TokenKind::symbol) break;
      std::optional<BinaryOp> op;
      for (BinaryOp candidate : {BinaryOp::logical_or, BinaryOp::logical_and, BinaryOp::lt, BinaryOp::le, BinaryOp::gt,
                                 BinaryOp::ge, BinaryOp::eq, BinaryOp::ne, BinaryOp::add, BinaryOp::sub,
                                 BinaryOp::mul, BinaryOp::div, BinaryOp::floordiv, BinaryOp::mod}) {
        if (binary_precedence(candidate) == level && binary_op_symbol(candidate) == t.text) op = candidate;
      }
      if (!op) break;
      next();
      operands.push_back(parse_binary_level(level + 1));
      ops.push_back(*op);
      tokens.push_back(&t);
      if (level == 3) {
        const Token& again = peek();
        for (auto s : {"<", "<=", ">", ">=", "==", "!="})
          if (again.is(s)) error(again, "comparisons do not chain; write (a < b) && (b < c)");
        break;
      }
    }
    return fold_chain(operands, ops, tokens);
  }
  Expr parse_or() { return parse_binary_level(1); }

  Expr parse_unary() {
    const Token& t = peek();
    NestingGuard guard(*this, t);
    if (accept("-")) {
      Expr operand = parse_unary();
      if (auto c = operand.as<ConstNode>())
        return track(c->is_integer ? make_int(-static_cast<int64_t>(c->value), t.loc) : make_const(-c->value, t.loc), t);
      return track(make_unary(UnaryOp::neg, operand, t.loc), t);
    }
    if (accept("!")) return track(make_unary(UnaryOp::logical_not, parse_unary(), t.loc), t);
    return parse_primary();
  }

  std::vector<Expr> parse_args(const std::string& function, size_t count) {
    std::vector<Expr> args;
    const Token& open = peek();
    expect("(", " after '" + function + "'");
    if (!peek().is(")")) {
      do args.push_back(parse_expr());
      while (accept(","));
    }
    expect(")", " to close the arguments of '" + function + "'");
    if (args.size() != count)
      error(open, "'" + function + "' takes " + std::to_string(count) + " argument(s), found " + std::to_string(args.size()));
    return args;
  }

  Expr parse_primary() {
    const Token& t = peek();
    if (t.kind == TokenKind::integer) { next(); return track(make_int(static_cast<int64_t>(t.number), t.loc), t); }
    if (t.kind == TokenKind::real) { next(); return track(make_const(t.number, t.loc), t); }
    if (accept("(")) {
      Expr e = parse_expr();
      expect(")", " to close '(' at " + std::to_string(t.loc.line) + ":" + std::to_string(t.loc.column));
      return e;
    }
    if (t.kind != TokenKind::name) expected("an expression");
    const std::string& name = t.text;
    if (name == "inf") { next(); return track(make_const(std::numeric_limits<double>::infinity(), t.loc), t); }
    if (name == "cast") {
      next();
      expect("(", " after 'cast'");
      Expr operand = parse_expr();
      expect(",", " and a dtype: cast(x, dtype)");
      DType d = parse_dtype_token();
      expect(")", " to close 'cast'");
      return track(make_cast(d, operand, t.loc), t);
    }
    if (name == "select") {
      next();
      auto args = parse_args("select", 3);
      return track(make_select(args[0], args[1], args[2], t.loc), t);
    }
    if (peek(1).is("(")) {
      if (auto op = parse_reduce_op(name)) {
        // max(a, b) / min(a, b) is the binary function unless its arguments are all fresh names.
        bool binary = (*op == ReduceOp::max || *op == ReduceOp::min) && (!in_body_ || !fresh_arguments(pos_ + 2, index_vars_));
        if (!binary) {
          if (in_body_) return parse_inner_reduction(*op);
          error(t, "a reduction ('" + name + "(...)') may only appear in a definition's right-hand side");
        }
      }
      if (auto u = unary_function(name)) {
        next();
        auto args = parse_args(name, 1);
        return track(make_unary(*u, args[0], t.loc), t);
      }
      if (auto b = binary_function(name)) {
        next();
        auto args = parse_args(name, 2);
        return track(make_binary(*b, args[0], args[1], t.loc), t);
      }
      if (is_tensor(name)) error(peek(1), "expected '[' to index tensor '" + name + "', found '('");
      error(t, "unknown function '" + name + "'; the functions are exp log tanh sqrt rsqrt abs sigmoid silu gelu sin cos tan "
               "erf exp2 log2 log1p expm1 floor ceil round round_tf32 max min pow select cast");
    }
    if (kKeywords.count(name)) error(t, "expected an expression, found the keyword '" + name + "'");
    next();
    if (peek().is("[")) {
      if (!is_tensor(name)) {
        std::string known;
        for (auto& in : program_.inputs) known += (known.empty() ? "" : ", ") + in.name;
        for (auto& d : program_.defs) {
          known += (known.empty() ? "" : ", ") + d.target.name;
          if (d.index_target) known += ", " + d.index_target->name;
        }
        error(t, "unknown tensor '" + name + "'; expected one of the inputs or earlier definitions" +
                     (known.empty() ? std::string("") : ": " + known));
      }
      const Token& open = peek();
      next();
      std::vector<Expr> index;
      if (!peek().is("]")) {
        do index.push_back(parse_expr());
        while (accept(","));
      }
      expect("]", " to close the index of '" + name + "'");
      size_t rank = tensor_rank(name);
      if (index.size() != rank)
        error(open, "tensor '" + name + "' has " + std::to_string(rank) + " dim(s), found " +
                        std::to_string(index.size()) + " index expression(s)");
      return track(make_load(name, std::move(index), t.loc), t);
    }
    if (is_dim(name)) return track(make_dim(name, t.loc), t);
    if (is_tensor(name)) {
      if (tensor_rank(name) != 0)
        error(t, "tensor '" + name + "' has " + std::to_string(tensor_rank(name)) + " dim(s); expected '" + name + "[...]'");
      return track(make_load(name, {}, t.loc), t);
    }
    return track(make_var(name, t.loc), t);
  }
};

}  // namespace

Program parse_program(std::string_view text, const std::string& file) {
  Parser parser(tokenize(text, file), file);
  return parser.parse();
}

Program parse_program_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, {}, "cannot read the file (does it exist?)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_program(buffer.str(), path);
}

}  // namespace solder
