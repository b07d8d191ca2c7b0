from common import *
run("a0_honest_relu", RELU_MODEL_NEW)
