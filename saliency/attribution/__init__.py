"""Attribution: seeds (which v goes into backward(v)) and the methods built on them."""
