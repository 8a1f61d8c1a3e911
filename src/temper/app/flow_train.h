// `temper flow train [RECIPE]`: flow-matching training of a velocity model ([model]) on a data source ([data])
// in a run directory (side_run.h): metrics (loss, and at each evaluation FD, MMD, precision/recall in the
// frozen [features] space, and the distances to the true density on 2-D data), TensorBoard, checkpoints
// (the model's named tensors, AdamW's moments and step) with bitwise resume, sample PNGs under images/ shown in
// report.html. eval.patience > 0 stops when FD has not improved by 1% in that many evaluations ("until FD
// stops improving").
#pragma once

#include "temper/app/side_run.h"

namespace temper::app {

extern const char* const kFlowTrainRecipe;  // the built-in recipe: a 2-D flow on eight Gaussians
int run_flow_train(const SideRunOptions& o);

}  // namespace temper::app
