# Reference values for the harm model under separation and for its penalised (bglmer) option.
# Run from the repository root:  Rscript tests/data/lme4_separation_reference.R > tests/data/lme4_separation_reference.out
# (Debian: apt-get install -y r-base-core r-cran-lme4 r-cran-blme). The output is committed and parsed by
# tests/review_app/analysis/test_harm_model_separation.py, so the test suite itself never needs R.
#
# Data: tests/data/sim_harm_separated.csv (written by make_sim_harm_separated.py): the paper-shaped
# simulation with 0 of 6 worst-case annotations in the potentially-true stratum (no events) and 12 of 12
# in threshold corruption (all events). The references are the paper's (claude, cue remapping, neutral,
# clear), so stratumpotentially_true and content_typethreshold_corruption are separated.
suppressMessages({
  library(lme4)
  library(blme)
})
options(digits = 10)

report <- function(label, fit, form = get("form", envir = globalenv())) {
  cat("==", label, "\n")
  cat("versions lme4", as.character(packageVersion("lme4")), "blme", as.character(packageVersion("blme")), "\n")
  est <- fixef(fit)
  se <- sqrt(diag(as.matrix(vcov(fit))))
  for (i in seq_along(est)) cat(sprintf("coef %s %.10f %.10f\n", names(est)[i], est[i], se[i]))
  cat(sprintf("variance %.10f\n", as.numeric(VarCorr(fit)[[1]][1, 1])))
  cat(sprintf("loglik %.10f\n", as.numeric(logLik(fit))))
  # The unpenalised Laplace log-likelihood at these estimates (glmer's own deviance function), so a
  # penalised fit's likelihood can be compared too.
  dev <- glmer(form, family = binomial, data = fit@frame, devFunOnly = TRUE, control = ctrl)
  environment(dev)$lower <- c(0, rep(-Inf, length(est)))
  cat(sprintf("laplace_loglik %.10f\n", -dev(c(getME(fit, "theta"), est)) / 2))
  cat(sprintf("singular %s\n", isSingular(fit)))
  msgs <- c(fit@optinfo$conv$lme4$messages, fit@optinfo$warnings)
  for (m in msgs) cat("message", gsub("\n", " ", as.character(m)), "\n")
}

read_sim <- function(path) {
  d <- read.csv(path, stringsAsFactors = FALSE)
  d$model <- relevel(factor(d$model), ref = "claude")
  d$content_type <- relevel(factor(d$content_type), ref = "cue_remapping")
  d$provenance <- relevel(factor(d$provenance), ref = "neutral")
  d$stratum <- relevel(factor(d$stratum), ref = "clear")
  d
}

ctrl <- glmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5))
form <- worst_case ~ model + content_type + provenance + stratum + (1 | rater)
separated <- read_sim("tests/data/sim_harm_separated.csv")
ordinary <- read_sim("tests/data/sim_harm.csv")

# 1. Maximum likelihood (Laplace) on separated data: lme4 stops somewhere along the separated directions
#    (huge estimates and SEs there) and reports every other term normally.
report("separated ML Laplace", glmer(form, family = binomial, data = separated, control = ctrl))

# 2. Penalised: blme::bglmer with independent normal priors on the fixed effects, SD 10 on the intercept
#    and 2.5 on every other coefficient (medrev's --penalty normal), and NO prior on the reviewer
#    variance (cov.prior = NULL; bglmer's own default would add a Wishart prior).
report("separated bglmer normal(10, 2.5)",
       bglmer(form, family = binomial, data = separated, control = ctrl,
              fixef.prior = normal(sd = c(10, 2.5)), cov.prior = NULL))
report("ordinary bglmer normal(10, 2.5)",
       bglmer(form, family = binomial, data = ordinary, control = ctrl,
              fixef.prior = normal(sd = c(10, 2.5)), cov.prior = NULL))
# 3. A stronger prior (--penalty normal:1) to check that the scale reaches the objective.
report("separated bglmer normal(10, 1)",
       bglmer(form, family = binomial, data = separated, control = ctrl,
              fixef.prior = normal(sd = c(10, 1)), cov.prior = NULL))

# 4. Quasi-complete separation that no single level shows (tests/data/quasi_separated.csv): the cells
#    (a=x, b=p) have no events and (a=y, b=q) only events, so the intercept, a and b diverge together.
quasi <- read.csv("tests/data/quasi_separated.csv", stringsAsFactors = FALSE)
quasi$a <- relevel(factor(quasi$a), ref = "x")
quasi$b <- relevel(factor(quasi$b), ref = "p")
quasi$c <- relevel(factor(quasi$c), ref = "u")
quasi_form <- y ~ a + b + c + (1 | g)
report("quasi ML Laplace", glmer(quasi_form, family = binomial, data = quasi, control = ctrl), quasi_form)
