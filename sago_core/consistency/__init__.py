"""Does a result on one out-of-distribution dataset predict another? (spec section 8)"""
