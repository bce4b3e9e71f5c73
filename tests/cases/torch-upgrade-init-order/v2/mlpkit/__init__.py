"""mlpkit: the residual MLP classifier our tabular jobs train, kept in one package so that
every job builds it the same way.

    from mlpkit import model
    net = model.Classifier(features, classes)
"""

__version__ = "2.4.0"
