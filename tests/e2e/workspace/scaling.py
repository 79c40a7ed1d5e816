"""A helper in another module: gradguard's static check sees one file at a time, the runtime doctor sees all."""


def scale_(t, factor):
    t.mul_(factor)
    return t
