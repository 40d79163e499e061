"""Training DOTS's difficulty predictor (`ads dots-train`): label rollouts of source policies, fit, measure. The
predictor and the sampler that uses it stay in ads_core.sampler.dots."""
