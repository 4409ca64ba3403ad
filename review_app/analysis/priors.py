"""The default priors of the penalised harm model and the ``--penalty`` help that names them.

Kept apart from ``harm_model`` (numpy, scipy, pandas) so that ``medrev stats --help`` and the Analysis
page's labels read them without loading the model fitting code.
"""

from __future__ import annotations

DEFAULT_PRIOR_INTERCEPT_SD = 10.0
DEFAULT_PRIOR_SD = 2.5
PENALTY_HELP = (
    "none (maximum likelihood, lme4::glmer; the default) or normal: independent normal priors on the fixed "
    f"effects, SD {DEFAULT_PRIOR_INTERCEPT_SD:g} on the intercept and {DEFAULT_PRIOR_SD:g} on the other "
    "coefficients (Gelman et al. 2008's weakly informative scale), no prior on the reviewer variance: "
    "blme::bglmer(fixef.prior = normal(sd = c(10, 2.5)), cov.prior = NULL). Gives separated terms finite "
    "estimates. normal:SD or normal:INTERCEPT_SD,SD sets the scales."
)
