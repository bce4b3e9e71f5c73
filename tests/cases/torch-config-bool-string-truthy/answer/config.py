"""The fix the ground truth applies: an override of a boolean setting is read as the word it
is ("false", "0", "no", "off" are False), not through bool(), for which every non-empty
string, "false" included, is True. Ints, floats, strings and lists convert as before."""

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def coerce(text, like):
    if like is None or isinstance(like, str):
        return text
    if isinstance(like, list):
        return [coerce(part.strip(), like[0]) for part in text.split(",")]
    if isinstance(like, bool):
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError(f"not a boolean: {text!r}")
    return type(like)(text)
