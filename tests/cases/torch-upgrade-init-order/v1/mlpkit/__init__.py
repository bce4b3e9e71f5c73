"""mlpkit: the residual MLP classifier our tabular jobs train, kept in one package so that
every job builds it the same way."""

__version__ = "2.3.0"
