"""An experiment from its file to its report, on any testbed (``lblab run``)."""
