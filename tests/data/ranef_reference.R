# Reference conditional modes and conditional SDs of the reviewer (herd) intercepts, computed once
# with lme4::ranef(condVar = TRUE) on the cbpp data expanded to 0/1 rows (Laplace fit).
# Run from the repository root:  Rscript tests/data/ranef_reference.R
# The printed numbers are kept as constants in tests/review_app/analysis/test_reviewer_quality.py.
suppressMessages(library(lme4))
options(digits = 10)
cbpp <- read.csv("tests/data/cbpp.csv")
cbpp$herd <- factor(cbpp$herd)
cbpp$period <- factor(cbpp$period)
rows <- lapply(seq_len(nrow(cbpp)), function(i) {
  r <- cbpp[i, ]
  data.frame(herd = r$herd, period = r$period,
             y = c(rep(1L, r$incidence), rep(0L, r$size - r$incidence)))
})
binary <- do.call(rbind, rows)
ctrl <- glmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5))
fit <- glmer(y ~ period + (1 | herd), family = binomial, data = binary, control = ctrl)
re <- ranef(fit, condVar = TRUE)$herd
sds <- sqrt(attr(re, "postVar")[1, 1, ])
cat("lme4", as.character(packageVersion("lme4")), "\n")
for (i in seq_len(nrow(re))) cat(sprintf("herd %s %.8f %.8f\n", rownames(re)[i], re[i, 1], sds[i]))
