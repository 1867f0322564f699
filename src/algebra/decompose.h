// The cascaded-reduction analysis (RedFuser §3–4, extended).
//
// A reduction  d = ⊕_l F(x_l, D)  that reads results D of earlier reductions of the same cascade can
// run in the same pass over the data as they do when F decomposes. decompose_reduction decides how:
//
//   independent     F does not read D: an ordinary running reduction.
//   multiplicative  ⊕ = + and F = G(x) × H(D) (RedFuser eq. 4 with ⊗ = ×). Exact rewriting finds G
//                   and H: products and quotients are flattened, exp(a ± b) = exp(a)·exp(±b), integer
//                   powers distribute, and every factor must depend on x alone or on D alone.
//                   H splits into an online part (its exp factors, which keep the accumulator in
//                   range and are rescaled by H(D_new)/H(D_old) whenever D moves — eq. 15–16) and a
//                   deferred part applied once at the end (e.g. the 1/z of softmax). A running
//                   accumulator whose old H is not invertible (a D at ±inf: a row that has seen only
//                   masked scores) is reset to the identity instead of rescaled (appendix A.1); that
//                   is exact because every term it held was the identity.
//   additive        ⊕ = max or min and F = G(x) + H(D) (⊗ = +): select on G, add H(D_final) at the
//                   end. argmax/argmin/topk select on the D-independent key G the same way.
//   monotone        argmax/argmin/topk of F = c·exp(K(x) + E(D))·P(D) with c > 0 and P(D) > 0:
//                   F is strictly increasing in the key K(x) for every D, so selecting on K selects
//                   on F (top-k of softmax = softmax of the top-k logits). Stream the selection on K;
//                   the values are F at the selected keys with the final D (`value_from_key`, where
//                   the load `@key` stands for the stored key).
//   polynomial      ⊕ = + and F is a polynomial in one earlier result D (variance: (x − m)²,
//                   moment of inertia). The state is the Taylor coefficients B_k = Σ_l F_k(x_l, C)
//                   around a centre C; moving the centre by δ maps B'_j = Σ_{k≥j} C(k,j) δ^{k−j} B_k,
//                   and B_0 at C = D_final is the answer. Keeping C near the data (the running D)
//                   avoids the cancellation of power sums — Chan's update, generalised.
//   refused         anything else; `reason` names the factor or rule that stopped it.
//
// Rewriting proposes; evaluation disposes: every decomposition is confirmed by evaluating F and its
// decomposed form (and RedFuser's fixed-point identity, eq. 23) at random points; a disagreement
// refuses the fusion.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "algebra/monoid.h"
#include "ir/expr.h"

namespace solder {

struct Decomposition {
  enum class Kind { independent, multiplicative, additive, monotone, polynomial, refused };
  Kind kind = Kind::refused;
  std::string reason;                   // why refused
  std::vector<std::string> d_tensors;   // the earlier results F reads
  Expr g, h;                            // F = G ⊗ H (multiplicative, additive), for reports
  Expr h_online;                        // the part of H the accumulator carries (undefined: none)
  Expr h_deferred;                      // the part applied at the end (undefined: none)
  Expr online_term;                     // what one element adds: F without h_deferred, kept stable
  Expr value_from_key;                  // monotone: F in terms of the load `@key` and D
  Expr d_load;                          // polynomial: the load of D that F is a polynomial in
  std::vector<Expr> taylor;             // polynomial: F_k = (1/k!) ∂^k F / ∂D^k, k = 0..degree
  std::string confirmation;             // how it was confirmed

  bool decomposable() const { return kind != Kind::refused; }
};

std::string_view decomposition_kind_name(Decomposition::Kind kind);

// `is_d(tensor)`: whether a load reads an earlier result of the cascade. `dims` binds dim sizes.
// `is_positive(tensor)` tells which earlier results are known to be positive (a sum of exponentials),
// for the monotone selections.
Decomposition decompose_reduction(const Expr& body, ReduceOp op, const std::function<bool(const std::string&)>& is_d,
                                  const std::map<std::string, int64_t>& dims,
                                  const std::function<bool(const std::string&)>& is_positive = {});

// H_online(D_new) ⊗ H_online(D_old)^{-1}, simplified (exp factors merged: exp(m_old − m_new)); the
// loads of D_old read the tensors `old_names[D]`.
Expr rescale_factor(const Decomposition& d, const std::map<std::string, std::string>& old_names);

// Symbolic derivative of `e` with respect to the atom `wrt` (a load), for polynomial bodies.
Expr derivative(const Expr& e, const Expr& wrt);

// Degree of `e` as a polynomial in the atom `wrt`; -1 when it is not a polynomial in it.
int polynomial_degree(const Expr& e, const Expr& wrt);

}  // namespace solder
