// The recipe of `temper tabular ...` runs: [tabular] (tabular/config.h) and, when named, [tabular.grid],
// [tabular.graph] and [[tabular.machines]]; the built-in recipe (the 9x9 office world, coffee / mail / clean,
// PQLRM); and the product plus its exact front, built once for the train and front commands.
#pragma once

#include <string>
#include <vector>

#include "temper/app/recipe.h"
#include "temper/tabular/config.h"
#include "temper/tabular/product.h"

namespace temper::app {

extern const char* const kTabularDefaultRecipe;

// Resets c and reads every tabular section the recipe uses into it.
void read_tabular_config(Recipe& r, tabular::TabularConfig& c);

// The exact front at (start, u0) when c.truth and the product is at most c.truth_max_states (S x U) large; empty
// otherwise. note: why it is empty ("" when computed).
std::vector<double> tabular_truth(const tabular::ProductMdp& p, const tabular::TabularConfig& c, std::string* note);

}  // namespace temper::app
